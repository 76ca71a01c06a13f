import AuthGateCore
package import AuthGateRPC
package import FoundationEssentials

/// What a person is told to do for a device-code or browser sign-in (`login.begin`'s result),
/// for standard error: the page, the code, a QR code of the page with the code filled in, and
/// until when the sign-in stays open. The code and the URLs come from the provider: each passes
/// ``Terminal/safe(_:)`` (the daemon refuses controls in them too); the QR code is this tool's
/// own drawing.
package struct SignInInstructions {
    package var provider: String
    /// authgate is trying to open the page in a browser (`--no-browser` not given).
    package var openingBrowser: Bool
    /// Draw the QR code (`--no-qr` not given, and standard error is a terminal).
    package var drawsQRCode: Bool

    package init(provider: String, openingBrowser: Bool, drawsQRCode: Bool) {
        self.provider = provider
        self.openingBrowser = openingBrowser
        self.drawsQRCode = drawsQRCode
    }

    /// The lines for `begin`, ending with a newline.
    package func text(_ begin: LoginBeginResult, now: Date = Date()) -> String {
        var lines: [String] = []
        let verificationURI = Terminal.safe(begin.verificationURI)
        if begin.grant == .deviceCode {
            lines.append("To sign in to \(provider), open \(verificationURI)")
            if let code = begin.userCode { lines.append("and enter the code:  \(Terminal.safe(code))") }
            if let complete = begin.verificationURIComplete, drawsQRCode, let qr = QRCode(text: complete) {
                lines.append("")
                lines.append("or scan this with your phone (\(Terminal.safe(complete))):")
                lines.append(qr.terminalRendering())
            } else if let complete = begin.verificationURIComplete {
                lines.append("(or open \(Terminal.safe(complete)), which has the code filled in)")
            }
        } else {
            lines.append("To sign in to \(provider), open this page in your browser\(openingBrowser ? " (authgate is trying to open it for you)" : ""):")
            lines.append("")
            lines.append("    \(begin.authorizationURL.map(Terminal.safe) ?? verificationURI)")
        }
        lines.append("")
        lines.append("The sign-in stays open until \(Terminal.describe(begin.expiresAt, now: now)); Ctrl-C cancels it.")
        return lines.joined(separator: "\n") + "\n"
    }
}
