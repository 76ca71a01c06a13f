import Foundation
package import Logging

/// Collects log lines as text.
package struct RecordingLogHandler: LogHandler {
    package let text: SharedText
    package var metadata: Logger.Metadata = [:]
    package var logLevel: Logger.Level = .trace

    package init(_ text: SharedText) { self.text = text }

    package subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    package func log(event: LogEvent) {
        text.append(Data("\(event.level) \(event.message) \(event.metadata ?? [:])\n".utf8))
    }
}
