import AuthGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// Who may use what: files others could have written are refused (StrictModes), `access` rules
/// by user, group and executable, and the admin group — with real uids.
@Suite("Access control", .serialized)
struct AccessControlTests {
    static let isRootWithTools =
        getuid() == 0
        && ["/usr/bin/setpriv", "/usr/sbin/useradd", "/usr/sbin/groupadd"]
            .allSatisfy { FileManager.default.isExecutableFile(atPath: $0) }

    @Test("a world-writable provider file is refused with a sentence naming it; the others are served")
    func worldWritableProviderFile() throws {
        let scratch = try ScratchDirectory()
        let directory = scratch.path + "/providers.d"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        try Data(Providers.mock.utf8).write(to: URL(fileURLWithPath: directory + "/mock.json"))
        try Data(Providers.mock.utf8).write(to: URL(fileURLWithPath: directory + "/open.json"))
        chmod(directory + "/open.json", 0o666)
        let check = try run(BuiltProducts.daemon, ["--check", "--providers", directory])
        #expect(check.status == 1)
        #expect(
            check.stdout.contains(
                "\(directory)/open.json: $: refused: the provider file \(directory)/open.json is writable by everyone (mode 0666); run chmod go-w on it"
            ),
            "\(check.stdout)"
        )
        #expect(check.stdout.contains("1 ready, 1 invalid"))

        chmod(directory + "/open.json", 0o664)
        let group = try run(BuiltProducts.daemon, ["--check", "--providers", directory])
        #expect(group.stdout.contains("is writable by its group (mode 0664)"), "\(group.stdout)")
    }

    @Test("a providers directory others can write stops the daemon with a clear error")
    func writableProvidersDirectory() throws {
        let scratch = try ScratchDirectory()
        let directory = scratch.path + "/providers.d"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        try Data(Providers.mock.utf8).write(to: URL(fileURLWithPath: directory + "/mock.json"))
        chmod(directory, 0o777)
        let result = try run(
            BuiltProducts.daemon,
            [
                "--user", "--providers", directory, "--socket", scratch.path + "/s.sock",
                "--state-dir", scratch.path + "/state",
            ]
        )
        #expect(result.status != 0)
        #expect(result.stderr.contains("\(directory): refused: the providers directory \(directory) is writable by everyone (mode 0777)"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: scratch.path + "/s.sock"))
    }

    @Test("a client secret file readable by everyone is refused, naming the field and the file")
    func readableSecretFile() throws {
        let scratch = try ScratchDirectory()
        let secret = scratch.path + "/corp.secret"
        try scratch.write("corp.secret", "s3cr3t-client-secret-value\n")
        chmod(secret, 0o644)
        let provider = #"""
            {"type": "oauth2", "endpoints": {"token": "https://127.0.0.1:1/token"}, "client_id": "svc",
             "client_secret_file": "\#(secret)", "grants": ["client_credentials"]}
            """#
        try FileManager.default.createDirectory(atPath: scratch.path + "/providers.d", withIntermediateDirectories: false)
        try scratch.write("providers.d/corp.json", provider)
        let check = try run(BuiltProducts.daemon, ["--check", "--providers", scratch.path + "/providers.d"])
        #expect(check.status == 1)
        #expect(
            check.stdout.contains("$.client_secret_file: refused: the secret file \(secret) is readable by everyone (mode 0644); run chmod o-r on it"),
            "\(check.stdout)"
        )
        #expect(!check.stdout.contains("s3cr3t"))

        chmod(secret, 0o640)
        let fixed = try run(BuiltProducts.daemon, ["--check", "--providers", scratch.path + "/providers.d"])
        #expect(!fixed.stdout.contains("refused"), "\(fixed.stdout)")
    }

    @Test("a provider file owned by another user is refused", .enabled(if: getuid() == 0, "needs root to give a file away"))
    func foreignOwner() throws {
        let scratch = try ScratchDirectory()
        let directory = scratch.path + "/providers.d"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: false)
        try Data(Providers.mock.utf8).write(to: URL(fileURLWithPath: directory + "/theirs.json"))
        chown(directory + "/theirs.json", 65534, 65534)
        let check = try run(BuiltProducts.daemon, ["--check", "--providers", directory])
        #expect(
            check.stdout.contains("the provider file \(directory)/theirs.json is owned by uid 65534; it must belong to root or to the daemon's user (uid 0)"),
            "\(check.stdout)"
        )
    }

    @Test(
        "two real users: access by user and by supplementary group; the admin group lists every session and reloads, but reads nobody's token",
        .enabled(if: isRootWithTools, "needs root, setpriv, useradd and groupadd to create a second user")
    )
    func twoUsers() throws {
        let user = "authgate-test-b"
        let group = "authgate-test-g"
        _ = try run(URL(fileURLWithPath: "/usr/sbin/groupadd"), ["-f", group])
        if try run(URL(fileURLWithPath: "/usr/bin/id"), [user]).status != 0 {
            let added = try run(URL(fileURLWithPath: "/usr/sbin/useradd"), ["-M", "-N", "-g", "nogroup", "-G", group, "-s", "/usr/sbin/nologin", user])
            #expect(added.status == 0, "\(added.stderr)")
        }
        defer {
            _ = try? run(URL(fileURLWithPath: "/usr/sbin/userdel"), [user])
            _ = try? run(URL(fileURLWithPath: "/usr/sbin/groupdel"), [group])
        }
        let daemon = try DaemonProcess(
            providers: [
                "mock.json": Providers.mock,
                "team.json": #"{"type": "mock", "users": [{"username": "demo", "password": "demo-password-1"}], "access": {"groups": ["\#(group)"]}}"#,
                "bobs.json": #"{"type": "mock", "access": {"users": ["\#(user)"]}}"#,
            ],
            arguments: ["--socket-group", "nogroup", "--admin-group", group]
        )
        chmod(daemon.scratch.path, 0o755)
        let asB = ["/usr/bin/setpriv", "--reuid=\(user)", "--regid=nogroup", "--init-groups", "--"]
        let asNobody = ["/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]

        try daemon.signIn()
        let rootToken = try daemon.cli(["token", "mock"]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(rootToken.count > 20)

        func providerIDs(_ prefix: [String]) throws -> [String] {
            let list = try daemon.cli(["providers", "--json"], prefix: prefix)
            let entries = try JSONSerialization.jsonObject(with: Data(list.stdout.utf8)) as? [[String: Any]] ?? []
            return entries.compactMap { $0["id"] as? String }
        }
        #expect(try providerIDs(asB) == ["bobs", "mock", "team"], "by name, and by a supplementary group")
        #expect(try providerIDs(asNobody) == ["mock"])
        let denied = try daemon.cli(["login", "team", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n", prefix: asNobody)
        #expect(denied.stderr.contains("permission_denied"), "\(denied.stderr)")
        #expect(try daemon.cli(["login", "team", "--username", "demo", "--password-stdin"], stdin: "demo-password-1\n", prefix: asB).status == 0)

        // The admin group sees everyone's sessions, with their uids, and never a token.
        let all = try daemon.cli(["status", "--all", "--json"], prefix: asB)
        #expect(all.status == 0, "\(all.stderr)")
        let sessions = try JSONSerialization.jsonObject(with: Data(all.stdout.utf8)) as? [[String: Any]] ?? []
        let owners = sessions.map { "\($0["uid"] as? Int ?? -1):\($0["provider"] as? String ?? "")" }.sorted()
        let uidB = try run(URL(fileURLWithPath: "/usr/bin/id"), ["-u", user]).stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(owners == ["0:mock", "\(uidB):team"])
        #expect(!all.stdout.contains(rootToken) && !all.stdout.contains("access_token"))
        let table = try daemon.cli(["status", "--all"], prefix: asB)
        #expect(table.stdout.hasPrefix("UID"), "\(table.stdout)")
        #expect(try daemon.cli(["token", "mock"], prefix: asB).stderr.contains("login_required"), "an admin reads nobody's token")
        #expect(try daemon.cli(["reload"], prefix: asB).status == 0)

        let nobodyAll = try daemon.cli(["status", "--all"], prefix: asNobody)
        #expect(nobodyAll.status != 0 && nobodyAll.stderr.contains("permission_denied") && nobodyAll.stderr.contains(group), "\(nobodyAll.stderr)")
        #expect(try daemon.cli(["reload"], prefix: asNobody).stderr.contains("permission_denied"))
        #expect(try daemon.cli(["status"], prefix: asNobody).stdout.contains("no sessions"))
        // How busy the daemon is for everyone is for administrators.
        #expect(try daemon.cli(["info", "--json"], prefix: asB).stdout.contains("cached_token_answers"))
        let nobodyInfo = try daemon.cli(["info", "--json"], prefix: asNobody)
        #expect(nobodyInfo.status == 0 && !nobodyInfo.stdout.contains("cached_token_answers"), "\(nobodyInfo.stdout)")
    }
}
