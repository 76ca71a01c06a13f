package import AuthGateClient
import AuthGateCore
import AuthGateRPC

#if canImport(Glibc)
package import Glibc
#endif

/// What `authgate sink` does with each event of the session it follows (``TokenFollower``): a
/// token is written to the file in its format, then `--on-change` runs; an ending or a refusal
/// removes the file and says why, so that a service fails loudly instead of sending a dead
/// token. The CLI checks the options, opens the file's directory and follows; this decides and
/// writes (tested in process with events of its own).
package final class TokenSink {
    private let file: TokenFile
    private let shown: String
    private let format: TokenFileFormat
    private let mode: mode_t
    private let onChange: OnChangeRunner?
    private let report: (String) -> Void
    /// Whether the last token given was written (what `--once` exits by).
    package private(set) var written = false

    /// - Parameters:
    ///   - shown: The file's path as the user gave it, for messages.
    ///   - report: Where a line for the user goes (the CLI's standard error), without a newline.
    package init(
        file: TokenFile,
        shown: String,
        format: TokenFileFormat,
        mode: mode_t,
        onChange: OnChangeRunner? = nil,
        report: @escaping (String) -> Void
    ) {
        self.file = file
        self.shown = shown
        self.format = format
        self.mode = mode
        self.onChange = onChange
        self.report = report
    }

    /// Handles one event; returns whether to follow on (with `once`, not after a token).
    package func handle(_ event: TokenFollower.Event, once: Bool) -> Bool {
        switch event {
        case .token(let token):
            written = write(token)
            if written { onChange?.trigger() }
            return !once
        case .ended(let ended):
            file.remove(because: "the session ended (\(ended.reason.rawValue))")
            report("the session ended (\(ended.reason.rawValue)): \(Terminal.safe(ended.message)) Waiting for a new sign-in.")
            return true
        case .unavailable(let reason, let message):
            file.remove(because: "\(Terminal.safe(message)) [\(reason.rawValue)]")
            return true
        }
    }

    private func write(_ token: TokenResult) -> Bool {
        do {
            try file.write(try format.render(token), mode: mode)
        } catch {
            report("cannot write \(Terminal.safe(shown)): \(error)")
            return false
        }
        report("wrote \(Terminal.safe(shown)) (the token is \(Terminal.validity(token.expiresAt))).")
        return true
    }

    /// `--format template`: the template at `path`, read as the daemon reads a file it trusts
    /// (root's or the caller's, in directories nobody else may change, no link another user
    /// owns, a regular file of at most 1 MiB) — a root sink copies it into a file it gives the
    /// service, so a service user could otherwise have it copy any root-only file to them —
    /// and parsed (known placeholders only, `{{token}}` among them).
    package static func template(at path: String) throws(ToolFailure) -> TokenFileFormat {
        let text: String
        switch FileTrust.read(path, as: .template, maximumSize: 1 << 20, followsLink: false) {
        case .success(let bytes): text = String(decoding: bytes, as: UTF8.self)
        case .failure(let problem):
            throw ToolFailure("the sink does not use the template: \(Terminal.safe(problem.description)).", status: ToolFailure.usage)
        }
        do throws(TokenTemplate.Problem) {
            return .template(try TokenTemplate(parsing: text))
        } catch {
            throw ToolFailure("the template \(Terminal.safe(path)) cannot be used: \(Terminal.safe(error.description)).", status: ToolFailure.usage)
        }
    }
}
