import AuthGateClient
import AuthGateCore
import AuthGateRPC
import AuthGateTestSupport
import AuthGateTools
import Foundation
import Testing

/// `authgate sink`'s handling of a followed session's events (TokenSink), in process: the
/// events are made here, the file is real.
@Suite("The sink's file through a session's events (TokenSink)")
struct TokenSinkTests {
    private func token(_ value: String) -> TokenFollower.Event {
        .token(TokenResult(accessToken: Secret(value), tokenType: "Bearer", expiresAt: Date().addingTimeInterval(600), scopes: [], idToken: nil))
    }

    private func sink(_ path: String, format: TokenFileFormat = .raw, report: @escaping (String) -> Void) throws -> TokenSink {
        guard case .success(let directory) = FileTrust.openDirectory(of: path, as: .tokenFile) else { throw POSIXError(.EACCES) }
        return TokenSink(file: TokenFile(directory, shown: path), shown: path, format: format, mode: 0o440, report: report)
    }

    @Test("a token is written (with its mode), a new one replaces it; an ending or a refusal removes the file, saying why; --once stops after a token")
    func events() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path + "/token"
        let lines = SharedText()
        let sink = try sink(path) { lines.append(Data(($0 + "\n").utf8)) }

        #expect(sink.handle(token("first-token"), once: false), "it follows on")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "first-token\n")
        #expect((try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int) == 0o440)
        #expect(sink.written)
        #expect(sink.handle(token("second-token"), once: false))
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "second-token\n")

        let ended = SessionEnded(provider: "corp", session: "default", reason: .loginRequired, message: "The provider refused the refresh.")
        #expect(sink.handle(.ended(ended), once: false), "it waits for a new sign-in")
        #expect(!FileManager.default.fileExists(atPath: path), "a dead token is not left for the service")
        #expect(lines.text.contains("the session ended (login_required): The provider refused the refresh. Waiting for a new sign-in."))

        #expect(!sink.handle(token("third-token"), once: true), "--once: done after a token")
        #expect(try String(contentsOfFile: path, encoding: .utf8) == "third-token\n")
        #expect(sink.handle(.unavailable(reason: .permissionDenied, message: "Not yours."), once: false))
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(lines.text.components(separatedBy: "wrote \(path)").count == 4, "each write said: \(lines.text)")
        #expect(!lines.text.contains("first-token") && !lines.text.contains("third-token"), "never the token")
    }

    @Test("a token the format cannot write leaves no file and says so, without the token; written is false (--once fails)")
    func unwritable() throws {
        let scratch = try ScratchDirectory()
        let path = scratch.path + "/token.env"
        let lines = SharedText()
        let sink = try sink(path, format: .env(name: "TOKEN")) { lines.append(Data(($0 + "\n").utf8)) }
        #expect(!sink.handle(token("quote'in-it"), once: true))
        #expect(!sink.written)
        #expect(!FileManager.default.fileExists(atPath: path))
        #expect(lines.text.contains("cannot write \(path)") && lines.text.contains("the env format cannot write"), "\(lines.text)")
        #expect(!lines.text.contains("quote'in-it"))
    }

    @Test("--template: a trusted file with known placeholders is the format; an unknown placeholder, no {{token}} or no file is a usage error (64)")
    func templates() throws {
        let scratch = try ScratchDirectory()
        let good = scratch.path + "/good.tmpl"
        try Data("Authorization: {{ token_type }} {{token}}\n".utf8).write(to: URL(fileURLWithPath: good))
        let format = try TokenSink.template(at: good)
        let rendered = try format.render(
            TokenResult(accessToken: Secret("abc"), tokenType: "Bearer", expiresAt: Date().addingTimeInterval(60), scopes: [], idToken: nil)
        )
        #expect(String(decoding: rendered, as: UTF8.self) == "Authorization: Bearer abc\n")

        for (text, expected) in [("{{token}} {{secret}}", "secret"), ("no placeholder at all", "token")] {
            let path = scratch.path + "/bad.tmpl"
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            #expect {
                _ = try TokenSink.template(at: path)
            } throws: { error in
                let failure = error as? ToolFailure
                return failure?.status == ToolFailure.usage && failure?.description.contains("cannot be used") == true
                    && failure?.description.contains(expected) == true
            }
        }
        #expect {
            _ = try TokenSink.template(at: scratch.path + "/missing.tmpl")
        } throws: { error in
            (error as? ToolFailure)?.status == ToolFailure.usage && "\(error)".contains("does not use the template")
        }
    }
}
