#if canImport(Glibc)
import Glibc
#endif

/// A thread of its own for work that holds one for long (a child process waited for, a
/// WebSocket tunnel), started when needed and gone when the work ends, so that nothing sits
/// idle in a pool for work that may never come.
public enum DetachedThread {
    /// Runs `body` on a new detached thread; false (with `errno` set) when none could be started.
    public static func start(_ body: @escaping @Sendable () -> Void) -> Bool {
        final class Work: Sendable {
            let body: @Sendable () -> Void
            init(_ body: @escaping @Sendable () -> Void) { self.body = body }
        }
        let work = Unmanaged.passRetained(Work(body)).toOpaque()
        var thread = pthread_t()
        let result = pthread_create(
            &thread,
            nil,
            { argument in
                guard let argument else { return nil }
                Unmanaged<Work>.fromOpaque(argument).takeRetainedValue().body()
                return nil
            },
            work
        )
        guard result == 0 else {
            Unmanaged<Work>.fromOpaque(work).release()
            errno = result
            return false
        }
        pthread_detach(thread)
        return true
    }
}
