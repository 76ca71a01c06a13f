/// Who holds the metrics listener's places, and whom a newcomer displaces: decisions only, no
/// I/O, so that they are tested in process.
///
/// The listener takes ``maximum`` connections at once and ``maximumPerPeer`` from one
/// address. A full table does not turn the newcomer away: it closes the oldest connection that
/// has not yet sent a complete request head (of the newcomer's address when that address holds
/// its share, else of anyone), and only when every place is a request being answered is the
/// newcomer refused. Every address in 127.0.0.0/8 is this host, so one local user could
/// otherwise hold every place with idle connections from four loopback addresses, reopened as
/// the head deadline closes them, and starve the health probes; now
/// each probe that sends its request at once displaces an idler instead.
struct MetricsPlaces: Sendable {
    struct Place: Sendable, Equatable {
        var id: Int
        var peer: String
        var headReceived = false
    }

    enum Admission: Sendable, Equatable {
        /// In, as `id`; `displacing` is the place to close first.
        case admitted(id: Int, displacing: Int?)
        case refused
    }

    let maximum: Int
    let maximumPerPeer: Int
    /// In order of arrival, the oldest first.
    private(set) var places: [Place] = []
    private var nextID = 0

    init(maximum: Int, maximumPerPeer: Int) {
        self.maximum = maximum
        self.maximumPerPeer = maximumPerPeer
    }

    mutating func admit(peer: String) -> Admission {
        var displaced: Int?
        if places.count(where: { $0.peer == peer }) >= maximumPerPeer {
            guard let idle = places.first(where: { $0.peer == peer && !$0.headReceived }) else { return .refused }
            displaced = idle.id
        } else if places.count >= maximum {
            guard let idle = places.first(where: { !$0.headReceived }) else { return .refused }
            displaced = idle.id
        }
        if let displaced { leave(displaced) }
        let id = nextID
        nextID += 1
        places.append(Place(id: id, peer: peer))
        return .admitted(id: id, displacing: displaced)
    }

    /// The connection's request head arrived: it is being answered, and is displaced no more.
    mutating func headReceived(_ id: Int) {
        if let index = places.firstIndex(where: { $0.id == id }) { places[index].headReceived = true }
    }

    /// The connection ended (or was displaced).
    mutating func leave(_ id: Int) {
        places.removeAll { $0.id == id }
    }
}
