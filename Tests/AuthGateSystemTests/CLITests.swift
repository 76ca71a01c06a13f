import AuthGateCore
import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// The `authgate` CLI end to end against a real daemon.
@Suite("authgate, the CLI")
struct CLITests {
    @Test("the README's tour: providers, login, token, status, info, logout; a piped password without --password-stdin")
    func tour() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let providers = try daemon.cli(["providers"])
        #expect(providers.status == 0)
        #expect(providers.stdout.contains("mock") && providers.stdout.contains("ready"))

        let login = try daemon.cli(["login", "mock", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n")
        #expect(login.status == 0, "\(login.stderr)")
        #expect(login.stdout.hasPrefix("Signed in to mock as mock:demo."))

        let token = try daemon.cli(["token", "mock"])
        #expect(token.status == 0)
        let value = token.stdout.trimmingCharacters(in: .newlines)
        #expect(value.hasPrefix("mock_at_") && !value.contains(" "), "a bare token for $(authgate token mock)")
        #expect(token.stdout == value + "\n")
        #expect(try daemon.cli(["token", "mock"]).stdout == token.stdout, "reused while valid")

        let status = try daemon.cli(["status"])
        #expect(status.stdout.contains("authenticated") && status.stdout.contains("mock:demo"))
        #expect(!status.stdout.contains(value))

        let info = try daemon.cli(["info", "--json"])
        let object = try #require(try JSONSerialization.jsonObject(with: Data(info.stdout.utf8)) as? [String: Any])
        #expect(object["sessions"] as? Int == 1)
        #expect(object["mode"] as? String == "user")

        // The mock issues no ID token: token --id-token says so, naming token's own way out.
        let noIDToken = try daemon.cli(["token", "mock", "--id-token"])
        #expect(
            noIDToken.status == 3 && noIDToken.stderr.contains("leave out --id-token for the access token")
                && !noIDToken.stderr.contains("--token-type"),
            "\(noIDToken)"
        )

        let json = try daemon.cli(["token", "mock", "--json"])
        let tokenObject = try #require(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [String: Any])
        #expect(tokenObject["access_token"] as? String == value)

        let logout = try daemon.cli(["logout", "mock"])
        #expect(logout.stdout == "Signed out of mock: the provider revoked the tokens.\n")
        let after = try daemon.cli(["token", "mock"])
        #expect(after.status == 3)
        #expect(after.stdout.isEmpty)
        #expect(after.stderr == "authgate: You are not signed in to mock; run `authgate login mock`. [login_required]\n")

        // A password piped without --password-stdin is read from the first line, as the README
        // says (it was the argument parser's usage text and exit 64); a wrong one is one sentence.
        let piped = try daemon.cli(["login", "mock", "--username", "demo"], stdin: "demo-password-1\n")
        #expect(piped.status == 0 && piped.stdout.hasPrefix("Signed in to mock as mock:demo."), "\(piped)")
        let wrong = try daemon.cli(["login", "mock", "--username", "demo"], stdin: "not-the-password\n")
        #expect(wrong.status != 64 && wrong.stderr.hasSuffix("[invalid_credentials]\n") && !wrong.stderr.contains("Usage"), "\(wrong)")
    }

    @Test(
        "the CLI (and so every helper) and the daemon start without libcurl and its libraries: it is opened when a request first needs it, so a token costs no TLS, HTTP/2 or Kerberos library's loading; as shipped, they load glibc's libc and libm and nothing else"
    )
    func startsWithoutLibcurl() throws {
        for binary in [BuiltProducts.cli, BuiltProducts.daemon] {
            let ldd = try run(URL(fileURLWithPath: "/usr/bin/ldd"), [binary.path])
            #expect(ldd.status == 0, "\(ldd.stderr)")
            for library in ["libcurl", "libssl", "libnghttp2", "libgssapi"] {
                #expect(!ldd.stdout.contains(library), "\(binary.lastPathComponent) links \(library): \(ldd.stdout)")
            }
            // The release build the package ships (the Swift runtime linked statically; a debug
            // build loads it from the toolchain): libstdc++ and libgcc's unwinder are inside too
            // (Sources/link/libstdc++.so), and no $ORIGIN library path sends the loader
            // searching beside the binary.
            guard !ldd.stdout.contains("libswiftCore") else { continue }
            let loaded = ldd.stdout.split(separator: "\n").compactMap { $0.split(whereSeparator: { $0 == " " || $0 == "\t" }).first.map(String.init) }
            #expect(
                Set(loaded) == ["linux-vdso.so.1", "libm.so.6", "libc.so.6", "/lib64/ld-linux-x86-64.so.2"],
                "\(binary.lastPathComponent) loads \(loaded)"
            )
            let dynamic = try run(URL(fileURLWithPath: "/usr/bin/readelf"), ["-d", binary.path])
            #expect(!dynamic.stdout.contains("RUNPATH") && !dynamic.stdout.contains("RPATH"), "\(dynamic.stdout)")
        }
    }

    @Test(
        "the functions start-up runs, listed for the linker (Sources/link/startup-order.txt), are the shipped executable's and lie together in its code: when the code has moved on, scripts/order-startup writes the list again"
    )
    func startupOrderIsCurrent() throws {
        let binary = BuiltProducts.cli
        // A debug build (the Swift runtime loaded from the toolchain) has other functions.
        let ldd = try run(URL(fileURLWithPath: "/usr/bin/ldd"), [binary.path])
        guard !ldd.stdout.contains("libswiftCore") else { return }
        let text = try String(contentsOf: Repository.root.appendingPathComponent("Sources/link/startup-order.txt"), encoding: .utf8)
        let wanted: Set<String> = Set(text.split(separator: "\n").map { String($0) })
        let symbols = try run(URL(fileURLWithPath: "/usr/bin/nm"), ["--defined-only", binary.path])
        #expect(symbols.status == 0, "\(symbols.stderr)")
        var functions: [FunctionSymbol] = []
        for line in symbols.stdout.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count == 3, fields[1] == "t" || fields[1] == "T", let address = UInt64(fields[0], radix: 16) else { continue }
            functions.append(FunctionSymbol(address: address, listed: wanted.contains(String(fields[2]))))
        }
        let present = functions.filter(\.listed).count
        #expect(present * 10 >= wanted.count * 8, "\(present) of the \(wanted.count) listed functions are in \(binary.path): run scripts/order-startup")
        // Placed together: the kernel maps code 64 KiB at a time, and the listed functions lie in
        // fewer of those blocks than scattered (measured: 157 of 327 placed, 253 unplaced; the
        // standard library's objects move as wholes, so not every listed function leads).
        let blocks = Set(functions.map { $0.address >> 16 })
        let listedBlocks = Set(functions.filter(\.listed).map { $0.address >> 16 })
        #expect(
            listedBlocks.count * 10 <= blocks.count * 6,
            "the listed functions lie in \(listedBlocks.count) of \(blocks.count) blocks of 64 KiB: the linker did not place them together"
        )
    }

    @Test("register signs the new user in")
    func register() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let result = try daemon.cli(
            ["register", "mock", "--username", "carol", "--email", "carol@example.com", "--password-stdin"],
            stdin: "sunny-meadow-77\nsunny-meadow-77\n"
        )
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout.hasPrefix("Registered and signed in to mock as mock:carol."))
        #expect(try daemon.cli(["token", "mock"]).status == 0)
        let relogin = try daemon.cli(["login", "mock", "--username", "carol", "--password-stdin"], stdin: "sunny-meadow-77\n")
        #expect(relogin.status == 0)
    }

    /// Each failure, its exit status and a piece of its message.
    static let failures: [(arguments: [String], stdin: String?, status: Int32, message: String)] = [
        (["login", "mock", "--username", "demo", "--password-stdin"], "nope\n", 4, "The username or password is incorrect. [invalid_credentials]"),
        (["login", "mock", "--username", "demo", "--password-stdin"], "\n", 5, "password: must not be empty"),
        (["login", "nope", "--username", "demo", "--password-stdin"], "x\n", 6, "There is no provider named 'nope'"),
        (
            ["login", "corp", "--username", "demo", "--password-stdin"], "x\n", 7,
            "Cannot reach corp: cannot connect to 127.0.0.1:1 (nothing answers, or the network is down). [network_error]"
        ),
        (["login", "broken", "--username", "demo", "--password-stdin"], "x\n", 6, "[provider_unavailable]"),
        (["token", "mock"], nil, 3, "[login_required]"),
        (["register", "mock", "--username", "demo", "--email", "d@example.com", "--password-stdin"], "good-password-1\n", 5, "[user_exists]"),
        (["register", "mock", "--username", "dave", "--email", "d@example.com", "--password-stdin"], "short\n", 5, "[weak_password]"),
        (
            ["register", "mock", "--username", "dave", "--email", "d@example.com", "--password-stdin"], "good-password-1\nother-password-1\n", 5,
            "password_confirmation: does not match the password"
        ),
        // Stdin that is no terminal holds the password (its first line), with or without --password-stdin.
        (["login", "mock", "--username", "demo"], "", 5, "password must not be empty. [validation_failed]"),
    ]

    @Test("each failure prints one clear sentence with its reason and exits with its class's status", arguments: failures)
    func failure(_ failure: (arguments: [String], stdin: String?, status: Int32, message: String)) throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock, "corp.json": Providers.oidc, "broken.json": Providers.broken])
        let result = try daemon.cli(failure.arguments, stdin: failure.stdin)
        #expect(result.status == failure.status, "\(result.stderr)")
        #expect(result.stderr.contains(failure.message), "\(result.stderr)")
        #expect(result.stdout.isEmpty)
    }

    @Test("no daemon: a clear sentence and exit status 2")
    func daemonUnreachable() throws {
        let scratch = try ScratchDirectory()
        let result = try run(BuiltProducts.cli, ["token", "mock"], environment: ["AUTHGATE_SOCKET": scratch.path + "/none.sock"])
        #expect(result.status == 2)
        #expect(
            result.stderr
                == "authgate: cannot reach authgated at \(scratch.path)/none.sock: no socket there (is authgated running? start it, or set AUTHGATE_SOCKET)\n"
        )
    }

    @Test("the password prompt does not echo on a terminal")
    func passwordPromptWithoutEcho() throws {
        let daemon = try DaemonProcess(providers: ["mock.json": Providers.mock])
        let shown = try OnTerminal.run(
            [BuiltProducts.cli.path, "login", "mock"],
            steps: [.type("demo", after: "Username for mock: "), .type("demo-password-1", after: "Password for demo at mock: ")],
            environment: ["AUTHGATE_SOCKET": daemon.socketPath]
        )
        #expect(shown.done == 2 && shown.status == 0 && shown.output.contains("Signed in to mock as mock:demo"), "\(shown.output)")
        #expect(shown.output.contains("demo\r\n"), "the username is echoed")
        #expect(!shown.output.contains("demo-password-1"), "the password is not: \(shown.output)")
    }
}

/// A function of the executable's symbol table, and whether the start-up order lists it.
private struct FunctionSymbol {
    var address: UInt64
    var listed: Bool
}
