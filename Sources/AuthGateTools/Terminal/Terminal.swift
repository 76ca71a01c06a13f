import AuthGateCore
import Dispatch
package import FoundationEssentials
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// Reading from and drawing on the user's terminal.
package enum Terminal {
    package static var stdinIsTerminal: Bool { isatty(STDIN_FILENO) == 1 }
    package static var stderrIsTerminal: Bool { isatty(STDERR_FILENO) == 1 }

    /// Writes `text` to stderr in one write(2).
    package static func writeError(_ text: String) {
        var text = text
        text.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
                if written <= 0 {
                    if written < 0, errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }

    /// Asks on stderr and reads one line from stdin.
    package static func ask(_ prompt: String) -> String? {
        writeError(prompt)
        return readLine(strippingNewline: true)
    }

    /// Asks for a secret with echo off; echo comes back even on Ctrl-C. Echo goes off before
    /// the prompt shows, as readpassphrase(3) does: a secret typed or pasted the moment the
    /// prompt appears is neither echoed nor discarded.
    package static func askSecret(_ prompt: String) -> String? {
        var original = termios()
        guard tcgetattr(STDIN_FILENO, &original) == 0 else {
            writeError(prompt)
            return readLine(strippingNewline: true)
        }
        savedTerminalState = original
        signal(SIGINT) { _ in
            if var state = savedTerminalState { tcsetattr(STDIN_FILENO, TCSANOW, &state) }
            write(STDERR_FILENO, "\n", 1)
            _exit(130)
        }
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &silent)
        writeError(prompt)
        let line = readLine(strippingNewline: true)
        tcsetattr(STDIN_FILENO, TCSAFLUSH, &original)
        signal(SIGINT, SIG_DFL)
        savedTerminalState = nil
        writeError("\n")
        return line
    }

    /// Reads a secret piped on stdin (`--password-stdin`): the first line, without its newline.
    package static func readSecretFromStdin() -> String? {
        readLine(strippingNewline: true)
    }

    /// Reads a password: asks for it on the terminal without echo, or takes the first line of
    /// stdin when it is not a terminal (a pipe, with or without `--password-stdin`, as the
    /// README says).
    package static func readPassword(passwordStdin: Bool, prompt: String) -> String {
        if passwordStdin || !stdinIsTerminal {
            return readSecretFromStdin() ?? ""
        }
        return askSecret(prompt) ?? ""
    }

    /// A string that came from outside (a provider's claims, codes, URLs and messages, the
    /// daemon's errors quoting them), fit to print: control characters, which could set the
    /// title, write the clipboard or move the cursor, are shown as `\u{XX}`. Everything the
    /// CLI prints from the daemon passes here.
    package static func safe(_ text: String) -> String {
        text.escapingControlCharacters
    }

    /// Left-aligned columns separated by two spaces; every cell passes ``safe(_:)``.
    package static func table(_ header: [String], _ rows: [[String]]) -> String {
        let all = [header] + rows.map { $0.map(safe) }
        let widths = header.indices.map { column in all.map { $0[column].count }.max() ?? 0 }
        return all.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: max(0, widths[index] - cell.count))
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }

    /// A date as local time, e.g. `2026-11-22 14:03:05 (in 4 min)`; `never` for the expiry of a
    /// token that never expires (the daemon's `4001-01-01T00:00:00Z`, `expires_in_default: "never"`).
    package static func describe(_ date: Date?, now: Date = Date()) -> String {
        guard let date else { return "-" }
        guard date < .distantFuture else { return "never" }
        let seconds = Int(date.timeIntervalSince(now).rounded())
        let magnitude = abs(seconds)
        let relative =
            switch magnitude {
            case ..<60: "\(magnitude) s"
            case ..<3600: "\((magnitude + 30) / 60) min"
            case ..<86_400: "\((magnitude + 1800) / 3600) h"
            default: "\((magnitude + 43_200) / 86_400) d"
            }
        return "\(localTime(date)) (\(seconds >= 0 ? "in \(relative)" : "\(relative) ago"))"
    }

    /// How long a token is valid, for a sentence: `valid until 2026-11-22 14:03:05 (in 4 min)`,
    /// or `valid with no expiry` for one that never expires.
    package static func validity(_ expiresAt: Date, now: Date = Date()) -> String {
        expiresAt < .distantFuture ? "valid until \(describe(expiresAt, now: now))" : "valid with no expiry"
    }

    /// `yyyy-MM-dd HH:mm:ss` in the local time zone, through the C library (DateFormatter would
    /// load ICU, which costs the CLI milliseconds at every start).
    package static func localTime(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970.rounded(.down))
        var parts = tm()
        guard localtime_r(&seconds, &parts) != nil else { return "\(date)" }
        var buffer = [CChar](repeating: 0, count: 32)
        let count = strftime(&buffer, buffer.count, "%Y-%m-%d %H:%M:%S", &parts)
        return String(decoding: buffer.prefix(count).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The terminal state to restore if Ctrl-C arrives while echo is off. Touched only by the main
/// thread and the SIGINT handler, which runs on it.
nonisolated(unsafe) private var savedTerminalState: termios?

/// A progress indicator on stderr while the daemon works, shown only on a terminal and only
/// after a short delay, so fast answers do not flicker.
package final class Spinner: Sendable {
    private let running = Atomic<Bool>(true)
    private let cleared = DispatchSemaphore(value: 0)

    package init?(message: String) {
        guard Terminal.stderrIsTerminal else { return nil }
        DispatchQueue.global().async { [self] in draw(message) }
    }

    private func draw(_ message: String) {
        let frames = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"]
        var index = 0
        usleep(150_000)
        while running.load(ordering: .acquiring) {
            Terminal.writeError("\r\(frames[index % frames.count]) \(message)")
            index += 1
            usleep(80_000)
        }
        if index > 0 { Terminal.writeError("\r\u{1B}[K") }
        cleared.signal()
    }

    /// Stops the indicator and waits until its line is cleared, so the caller prints on a clean line.
    package func stop() {
        guard running.exchange(false, ordering: .acquiringAndReleasing) else { return }
        cleared.wait()
    }
}
