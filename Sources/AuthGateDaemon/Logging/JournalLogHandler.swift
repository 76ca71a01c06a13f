public import Logging

#if canImport(Glibc)
import Glibc
#endif

/// Log lines for the systemd journal: each starts with its syslog priority (`<3>` for an error,
/// `<6>` for info, as `sd-daemon(3)` describes), so that `journalctl -p warning` and the
/// journal's colours work; no timestamp, as the journal adds its own.
///
/// authgated uses it when `$JOURNAL_STREAM` says that stderr goes to the journal, inside an
/// ``EscapingLogHandler``.
public struct JournalLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    public var logLevel: Logger.Level = .info
    private let label: String

    public init(label: String) {
        self.label = label
    }

    /// True when systemd connected stderr to the journal (`$JOURNAL_STREAM` is set).
    public static func isJournalStream(environment: [String: String]) -> Bool {
        !(environment["JOURNAL_STREAM"] ?? "").isEmpty
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        var line = "<\(Self.priority(event.level))>\(event.level) \(label): \(event.message)"
        if !merged.isEmpty {
            line += " " + merged.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        }
        // One write(2) per line, so that lines from several threads never interleave. A newline
        // inside would start a record without priority: EscapingLogHandler, which every line
        // passes first, has written it as \u{A}.
        line += "\n"
        _ = line.utf8CString.withUnsafeBufferPointer { write(STDERR_FILENO, $0.baseAddress, $0.count - 1) }
    }

    /// syslog priorities: debug 7, info 6, notice 5, warning 4, error 3, critical 2.
    static func priority(_ level: Logger.Level) -> Int {
        switch level {
        case .trace, .debug: 7
        case .info: 6
        case .notice: 5
        case .warning: 4
        case .error: 3
        case .critical: 2
        }
    }
}
