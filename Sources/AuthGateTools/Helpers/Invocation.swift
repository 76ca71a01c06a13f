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
        let invokedAs = commandLine.first.map { String($0.split(separator: "/").last ?? "") } ?? ""
        if invokedAs == "authgated" {
            self = .daemon(Array(commandLine.dropFirst()))
            return
        }
        let helper: String? =
            switch invokedAs {
            case "git-credential-authgate": "git-credential"
            case "docker-credential-authgate": "docker-credential"
            default: nil
            }
        if helper == "docker-credential" {
            self = .dockerCredential(Array(commandLine.dropFirst()))
            return
        }
        if helper == "git-credential", commandLine.count == 3, commandLine[1] == "-verbose" {
            self = .gitCredential(operation: commandLine[2], verbose: true)
            return
        }
        let arguments = (helper.map { [$0] } ?? []) + commandLine.dropFirst()
        guard arguments.count == 2, let argument = arguments.last, !argument.hasPrefix("-") else {
            self = .parse(arguments)
            return
        }
        switch arguments[0] {
        case "token": self = .token(provider: argument)
        case "kubectl": self = .kubectl(provider: argument)
        case "git-credential": self = .gitCredential(operation: argument, verbose: false)
        default: self = .parse(arguments)
        }
    }
}
