import AuthGateTools
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// How the executable was run (Invocation): the daemon and the helpers by their links' names, the forms run
/// without the argument parser, the rest for the parser. The built CLI runs them in CLITests
/// and CredentialHelperTests.
@Suite("How authgate was run: a helper's link, a form without the parser, or the parser")
struct InvocationTests {
    @Test("authgated is the daemon with all its arguments, whatever they are; only that name")
    func daemonLink() {
        #expect(
            Invocation(["/usr/bin/authgated", "--system", "--providers", "/etc/authgate/providers.d"])
                == .daemon(["--system", "--providers", "/etc/authgate/providers.d"])
        )
        #expect(Invocation(["authgated"]) == .daemon([]))
        #expect(Invocation(["authgated", "token", "corp"]) == .daemon(["token", "corp"]))
        #expect(Invocation(["/usr/bin/authgate", "--version"]) == .parse(["--version"]))
        #expect(Invocation(["/usr/bin/authgated-old", "--version"]) == .parse(["--version"]))
    }

    @Test("docker-credential-authgate is docker's helper with docker's arguments, whatever they are")
    func dockerLink() {
        #expect(Invocation(["/usr/bin/docker-credential-authgate", "get"]) == .dockerCredential(["get"]))
        #expect(Invocation(["docker-credential-authgate", "-v"]) == .dockerCredential(["-v"]))
        #expect(Invocation(["docker-credential-authgate"]) == .dockerCredential([]))
    }

    @Test("git-credential-authgate OPERATION and -verbose OPERATION are git's helper; authgate git-credential OPERATION too")
    func gitLink() {
        #expect(Invocation(["/usr/bin/git-credential-authgate", "get"]) == .gitCredential(operation: "get", verbose: false))
        #expect(Invocation(["git-credential-authgate", "-verbose", "get"]) == .gitCredential(operation: "get", verbose: true))
        #expect(Invocation(["authgate", "git-credential", "store"]) == .gitCredential(operation: "store", verbose: false))
        #expect(Invocation(["git-credential-authgate", "configure", "git.example.com"]) == .parse(["git-credential", "configure", "git.example.com"]))
        #expect(Invocation(["authgate", "git-credential", "-verbose", "get"]) == .parse(["git-credential", "-verbose", "get"]))
    }

    @Test("authgate token PROVIDER and authgate kubectl PROVIDER skip the parser; an option or another argument does not")
    func fastForms() {
        #expect(Invocation(["/usr/bin/authgate", "token", "corp"]) == .token(provider: "corp"))
        #expect(Invocation(["authgate", "kubectl", "corp"]) == .kubectl(provider: "corp"))
        #expect(Invocation(["authgate", "token", "--help"]) == .parse(["token", "--help"]))
        #expect(Invocation(["authgate", "token", "corp", "--header"]) == .parse(["token", "corp", "--header"]))
        #expect(Invocation(["authgate", "status", "corp"]) == .parse(["status", "corp"]))
        #expect(Invocation(["authgate"]) == .parse([]))
        #expect(Invocation([]) == .parse([]))
    }

    @Test("read from a C argv, as the executable reads its own, each command line is what the array of strings gives")
    func fromArgv() {
        let lines = [
            ["/usr/bin/authgate", "token", "corp"], ["authgated", "--user"], ["git-credential-authgate", "-verbose", "get"],
            ["git-credential-authgate", "get"], ["docker-credential-authgate", "list"], ["authgate", "status", "corp", "--json"],
            ["authgate", "kubectl", "-x"], ["authgate"],
        ]
        for line in lines {
            var pointers = line.map { strdup($0) } + [nil]
            defer { for pointer in pointers { free(pointer) } }
            #expect(Invocation(argc: Int32(line.count), argv: &pointers) == Invocation(line), "\(line)")
        }
    }
}
