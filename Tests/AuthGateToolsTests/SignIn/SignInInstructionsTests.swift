import AuthGateCore
import AuthGateRPC
import AuthGateTools
import Foundation
import Testing

/// What `authgate login` tells a person for a device-code or browser sign-in
/// (SignInInstructions), in process; InteractiveLoginTests follow the same lines on a terminal.
@Suite("A sign-in's instructions (SignInInstructions)")
struct SignInInstructionsTests {
    private let now = Date(timeIntervalSince1970: 1_800_000_000)

    private func device(code: String = "WDJB-MJHT", complete: String? = "https://sso.example.com/device?user_code=WDJB-MJHT") -> LoginBeginResult {
        LoginBeginResult(
            flowID: "flow_1",
            grant: .deviceCode,
            verificationURI: "https://sso.example.com/device",
            verificationURIComplete: complete,
            userCode: code,
            authorizationURL: nil,
            expiresAt: now.addingTimeInterval(600)
        )
    }

    @Test("device code: the page, the code, the page with the code filled in, and until when; a QR code of that page when asked")
    func deviceCode() {
        let plain = SignInInstructions(provider: "corp", openingBrowser: true, drawsQRCode: false).text(device(), now: now)
        #expect(plain.hasPrefix("To sign in to corp, open https://sso.example.com/device\nand enter the code:  WDJB-MJHT\n"), "\(plain)")
        #expect(plain.contains("(or open https://sso.example.com/device?user_code=WDJB-MJHT, which has the code filled in)"))
        #expect(
            plain.hasSuffix("\n\nThe sign-in stays open until \(Terminal.describe(now.addingTimeInterval(600), now: now)); Ctrl-C cancels it.\n"),
            "\(plain)"
        )
        #expect(!plain.contains("scan this"))

        let drawn = SignInInstructions(provider: "corp", openingBrowser: true, drawsQRCode: true).text(device(), now: now)
        #expect(drawn.contains("or scan this with your phone (https://sso.example.com/device?user_code=WDJB-MJHT):"))
        #expect(!drawn.contains("which has the code filled in") && drawn.split(separator: "\n").count > plain.split(separator: "\n").count + 10)
        // Without a page with the code filled in, there is nothing to draw.
        let bare = SignInInstructions(provider: "corp", openingBrowser: true, drawsQRCode: true).text(device(complete: nil), now: now)
        #expect(!bare.contains("scan this") && !bare.contains("filled in"))
    }

    @Test("browser: the authorization URL, and whether authgate is opening it")
    func browser() {
        let begin = LoginBeginResult(
            flowID: "flow_2",
            grant: .authorizationCode,
            verificationURI: "https://sso.example.com/authorize?client_id=a",
            verificationURIComplete: nil,
            userCode: nil,
            authorizationURL: "https://sso.example.com/authorize?client_id=a&code_challenge=x",
            expiresAt: now.addingTimeInterval(300)
        )
        let opening = SignInInstructions(provider: "corp", openingBrowser: true, drawsQRCode: true).text(begin, now: now)
        #expect(
            opening.contains(
                "open this page in your browser (authgate is trying to open it for you):\n\n    https://sso.example.com/authorize?client_id=a&code_challenge=x\n"
            )
        )
        let printing = SignInInstructions(provider: "corp", openingBrowser: false, drawsQRCode: true).text(begin, now: now)
        #expect(printing.contains("open this page in your browser:\n") && printing.contains("(in 5 min)"))
    }

    @Test("a provider's code and pages with terminal controls are printed without them")
    func hostileProvider() {
        let hostile = device(code: "AB\u{1B}]0;owned\u{07}CD", complete: "https://sso.example.com/d\u{1B}[2J")
        let text = SignInInstructions(provider: "corp", openingBrowser: false, drawsQRCode: false).text(hostile, now: now)
        #expect(!text.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(text.debugDescription)")
        #expect(text.contains("and enter the code:  AB"))
    }
}
