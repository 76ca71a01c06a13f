/// How the `authgate` executable was run, from its whole command line (the name it was run by
/// first). It is every program of authgate: installed as links, `authgated` is the daemon, and
/// `git-credential-authgate` and `docker-credential-authgate` are the helpers themselves (git
/// and docker run them by those names). The forms other programs
/// run before each of their requests go without the argument parser, whose reflection over
/// every command's options ran before the first syscall of its own (docs/BENCHMARKS.md, "What
/// was optimised"): `authgate token PROVIDER` (inside `$(...)`), `authgate kubectl PROVIDER`
/// and `git-credential-authgate OPERATION`. Any other form, including any option, goes through
/// the parser as usual.
package enum Invocation: Equatable {
    /// `authgated ARGUMENTS…`: the daemon, with its arguments.
    case daemon([String])
    /// `docker-credential-authgate ARGUMENTS…`: docker's helper, with docker's arguments.
    case dockerCredential([String])
    /// `git-credential-authgate OPERATION` (or `authgate git-credential OPERATION`), and
    /// `git-credential-authgate -verbose OPERATION`, which git runs for a helper configured as
    /// "authgate -verbose".
    case gitCredential(operation: String, verbose: Bool)
    /// `authgate token PROVIDER`: the bare token.
    case token(provider: String)
    /// `authgate kubectl PROVIDER`: the exec credential.
    case kubectl(provider: String)
    /// Anything else: these arguments for the parser (a helper's command first when it was run
    /// by its link's name).
    case parse([String])

    package init(_ commandLine: [String]) {
        self.init(count: commandLine.count) { commandLine[$0] }
    }

    /// The process's own command line, read from `argv` one argument at a time: the forms
    /// without the parser make no array of strings (the first one a process makes costs it a
    /// generic-metadata instantiation: docs/BENCHMARKS.md).
    package init(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        self.init(count: Int(argc)) { argv[$0].map { String(cString: $0) } ?? "" }
    }

    /// The command line of `count` arguments, the name it was run by first, each read by
    /// `argument` when needed.
    private init(count: Int, argument: (Int) -> String) {
        func arguments(from first: Int) -> [String] { first < count ? (first..<count).map(argument) : [] }
        // The name after the last slash (no split: no array of substrings for `authgate token`).
        let path = count > 0 ? argument(0) : ""
        let invokedAs = path.lastIndex(of: "/").map { String(path[path.index(after: $0)...]) } ?? path
        if invokedAs == "authgated" {
            self = .daemon(arguments(from: 1))
            return
        }
        let helper: String? =
            switch invokedAs {
            case "git-credential-authgate": "git-credential"
            case "docker-credential-authgate": "docker-credential"
            default: nil
            }
        if helper == "docker-credential" {
            self = .dockerCredential(arguments(from: 1))
            return
        }
        if helper == "git-credential", count == 3, argument(1) == "-verbose" {
            self = .gitCredential(operation: argument(2), verbose: true)
            return
        }
        // The command and its one argument: the helper's name stands for the command.
        let (command, operand): (String, String?) =
            switch (helper, count) {
            case (let helper?, 2): (helper, argument(1))
            case (nil, 3): (argument(1), argument(2))
            default: ("", nil)
            }
        // Any other form goes to the parser, a helper's command first.
        func parsed() -> Invocation { .parse((helper.map { [$0] } ?? []) + arguments(from: 1)) }
        guard let operand, !operand.hasPrefix("-") else {
            self = parsed()
            return
        }
        switch command {
        case "token": self = .token(provider: operand)
        case "kubectl": self = .kubectl(provider: operand)
        case "git-credential": self = .gitCredential(operation: operand, verbose: false)
        default: self = parsed()
        }
    }
}
