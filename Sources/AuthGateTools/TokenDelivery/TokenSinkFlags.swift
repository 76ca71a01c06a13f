import AuthGateClient

#if canImport(Glibc)
package import Glibc
#endif

extension TokenSink {
    /// `--format`'s names: what the file holds.
    package enum FormatName: String, CaseIterable, Sendable {
        case raw, header, json, nginx, env, template
    }

    /// `authgate sink`'s flags as typed: ``problem`` is what makes them unusable (the command's
    /// usage error), ``warning`` what it says of a usable but risky mode, ``options()`` what
    /// ``TokenSink/run(_:params:daemon:)`` runs with.
    package struct Flags {
        package var file: String
        package var format: FormatName
        /// `--env`: the variable of `--format env`.
        package var env: String
        /// `--template`: the template's path for `--format template`.
        package var template: String?
        /// `--mode`, in octal.
        package var mode: String
        package var owner: String?
        package var group: String?
        package var makesDirectories: Bool
        package var onChange: [String]
        package var onChangeTimeout: Double
        package var once: Bool

        package init(
            file: String,
            format: FormatName = .raw,
            env: String = "AUTHGATE_TOKEN",
            template: String? = nil,
            mode: String = "0400",
            owner: String? = nil,
            group: String? = nil,
            makesDirectories: Bool = false,
            onChange: [String] = [],
            onChangeTimeout: Double = 30,
            once: Bool = false
        ) {
            self.file = file
            self.format = format
            self.env = env
            self.template = template
            self.mode = mode
            self.owner = owner
            self.group = group
            self.makesDirectories = makesDirectories
            self.onChange = onChange
            self.onChangeTimeout = onChangeTimeout
            self.once = once
        }

        /// The sentence of the first flag that cannot be used: a mode that is not octal or lets
        /// a group or others write (whoever may write the file may hand the service a token of
        /// their choosing), no file, an `--env` that is no variable name, `--template` without
        /// `--format template` or the other way round, an `--on-change-timeout` out of range.
        package var problem: String? {
            guard let value = UInt16(mode, radix: 8), value <= 0o777 else { return "--mode must be an octal mode such as 0400 or 0640." }
            guard value & 0o022 == 0 else {
                return
                    "--mode \(mode) lets \(value & 0o002 != 0 ? "every user" : "the file's group") change the token file; use a mode such as 0400, 0440 or 0600."
            }
            guard !file.isEmpty else { return "--file must name a file." }
            if let problem = TokenSink.envProblem(env) { return problem }
            guard (format == .template) == (template != nil) else {
                return format == .template ? "--format template needs --template FILE." : "--template goes with --format template."
            }
            guard onChangeTimeout > 0, onChangeTimeout <= 86_400 else { return "--on-change-timeout must be between 0 and 86400 seconds." }
            return nil
        }

        /// `--mode` (checked by ``problem``; 0400 when it is not octal).
        package var fileMode: mode_t { mode_t(UInt16(mode, radix: 8) ?? 0o400) }

        /// What to say of a mode that lets every local user read the token.
        package var warning: String? {
            guard fileMode & 0o004 != 0 else { return nil }
            return "--mode \(mode) lets every local user read the token; give the service's group 0440 instead."
        }

        /// The sink's options: `--format` with its `--env`, or the template read and checked
        /// now (``TokenSink/template(at:)``).
        package func options() throws(ToolFailure) -> Options {
            let format: TokenFileFormat
            switch self.format {
            case .raw: format = .raw
            case .header: format = .header
            case .json: format = .json
            case .nginx: format = .nginx
            case .env: format = .env(name: env)
            case .template: format = try TokenSink.template(at: template ?? "")
            }
            return Options(
                file: file,
                format: format,
                mode: fileMode,
                owner: owner,
                group: group,
                makesDirectories: makesDirectories,
                onChange: onChange,
                onChangeTimeout: onChangeTimeout,
                once: once
            )
        }
    }
}

extension TokenSink {
    /// What is wrong with `--env NAME` (the sink's `--format env` and exec's variable), if
    /// anything: it must name an environment variable.
    package static func envProblem(_ name: String) -> String? {
        TokenFileFormat.isVariableName(name) ? nil : "--env must be a variable name: letters, digits and _, not starting with a digit."
    }
}
