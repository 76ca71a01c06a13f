import AuthGateCore
public import Logging

/// The one place every log line of authgated passes before it is written: control characters
/// in the message and in every metadata value (nested ones included) are made visible
/// (``Swift/StringProtocol/escapingControlCharacters``). Provider answers (`sub`, a JWKS `kid`,
/// an issuer) and socket clients' strings (a `resource`, a method name) reach log lines, and
/// a CR LF or NUL in one would otherwise let them forge a journal record of any priority.
///
/// authgated wraps its journal or stderr handler in it; it is also what the tests wrap an
/// in-memory handler in.
public struct EscapingLogHandler: LogHandler {
    private var wrapped: any LogHandler

    public init(wrapping handler: any LogHandler) {
        wrapped = handler
    }

    public var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    public var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = newValue.mapValues(Self.escape) }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue.map { provider in Logger.MetadataProvider { provider.get().mapValues(Self.escape) } } }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: key] = newValue.map(Self.escape) }
    }

    public func log(event: LogEvent) {
        var event = event
        let message = event.message.description
        if message.containsControlCharacters { event.message = Logger.Message(stringLiteral: message.escapingControlCharacters) }
        event.metadata = event.metadata?.mapValues(Self.escape)
        wrapped.log(event: event)
    }

    static func escape(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(text.escapingControlCharacters)
        case .stringConvertible(let convertible):
            convertible.description.containsControlCharacters ? .string(convertible.description.escapingControlCharacters) : value
        case .dictionary(let dictionary): .dictionary(dictionary.mapValues(escape))
        case .array(let array): .array(array.map(escape))
        }
    }
}
