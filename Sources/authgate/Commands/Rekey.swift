import ArgumentParser
import AuthGateCore
import AuthGateRPC
import AuthGateTools

struct Rekey: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Seal every saved session again under a new storage key (admins only).",
        discussion:
            "The daemon makes a new key, seals every user's sessions file with it, then puts it where the old key lived (the Secret Service or the state directory's authgate.key); a crash midway loses nothing. A key given by systemd as a credential is refused: the error says how to rotate it."
    )

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let result = try global.daemon.call(.storageRekey, EmptyResult(), as: StorageRekeyResult.self, progress: "Rekeying…")
        if global.json { return try global.printJSON(result) }
        let place = result.storageKey == "secret-service" ? "the Secret Service" : "the state directory's key file"
        print(
            "Sealed \(result.sessions) session\(result.sessions == 1 ? "" : "s") in \(result.files) file\(result.files == 1 ? "" : "s") "
                + "under a new key, kept in \(place)."
        )
        if result.unreadableFiles > 0 {
            print("\(result.unreadableFiles) file\(result.unreadableFiles == 1 ? "" : "s") no key opens were left as they are (the daemon's log names them).")
        }
    }
}
