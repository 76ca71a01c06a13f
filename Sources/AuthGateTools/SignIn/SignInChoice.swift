package import AuthGateCore

/// How `authgate login` — and the point-of-use sign-in of the helpers and `kubectl --setup` —
/// picks its grant: the one the flags ask for, else one the provider offers that fits where it
/// runs (a desktop, a terminal to type a password on).
package struct SignInChoice: Sendable {
    /// `--client-credentials`, `--device`, `--browser`, `--no-browser`.
    package var clientCredentials = false
    package var device = false
    package var browser = false
    package var noBrowser = false

    package init(clientCredentials: Bool = false, device: Bool = false, browser: Bool = false, noBrowser: Bool = false) {
        self.clientCredentials = clientCredentials
        self.device = device
        self.browser = browser
        self.noBrowser = noBrowser
    }

    /// The usage error of more than one way to sign in among `--device`, `--browser`,
    /// `--client-credentials` and, for `login` (`password` not `nil`), a user name or password
    /// given; `nil` for one way or none.
    package func problem(password: Bool?) -> String? {
        guard [device, browser, clientCredentials, password == true].filter({ $0 }).count > 1 else { return nil }
        return password == nil
            ? "Choose one way to sign in: --device, --browser or --client-credentials."
            : "Choose one way to sign in: --device, --browser, --client-credentials, or --username/--password-stdin."
    }

    /// Where the sign-in runs, as far as the choice goes.
    package struct Place: Sendable {
        /// A graphical session a browser can be opened in (`DISPLAY` or `WAYLAND_DISPLAY`).
        package var hasDesktop: Bool
        /// Standard input is a terminal a password could be typed on.
        package var stdinIsTerminal: Bool

        package init(hasDesktop: Bool, stdinIsTerminal: Bool) {
            self.hasDesktop = hasDesktop
            self.stdinIsTerminal = stdinIsTerminal
        }

        /// This process's.
        package static func current(environment: [String: String]) -> Place {
            Place(
                hasDesktop: !(environment["DISPLAY"] ?? "").isEmpty || !(environment["WAYLAND_DISPLAY"] ?? "").isEmpty,
                stdinIsTerminal: Terminal.stdinIsTerminal
            )
        }
    }

    /// Whether the grant depends on what the provider offers (the daemon's `providers.list`):
    /// not when a flag names it, nor for a user name or password given without
    /// `--client-credentials` (the password grant).
    package func needsOffer(userNamed: Bool) -> Bool {
        !(device || browser || (userNamed && !clientCredentials))
    }

    /// The grant to sign in with, `nil` for the password grant: the one asked for
    /// (`--client-credentials`: the provider's first service grant, ``Grant/isService``); else,
    /// with no user name or password (`userNamed` false), one of the provider's `offered`
    /// grants: its service grant when it has only those (a service's provider: no user name is
    /// asked for), the browser on a desktop or where there is no device code, the device code
    /// where there is no password grant or no terminal to type one on.
    package func grant(userNamed: Bool, offered: [Grant], at place: Place) -> Grant? {
        if device { return .deviceCode }
        if browser { return .authorizationCode }
        if userNamed, !clientCredentials { return nil }
        if clientCredentials { return offered.first(where: \.isService) ?? .clientCredentials }
        if !offered.isEmpty, offered.allSatisfy(\.isService) { return offered.first }
        let hasBrowser = offered.contains(.authorizationCode)
        let hasDevice = offered.contains(.deviceCode)
        if hasBrowser, place.hasDesktop || !hasDevice { return .authorizationCode }
        if hasDevice, !offered.contains(.password) || !place.stdinIsTerminal { return .deviceCode }
        return nil
    }
}
