import AuthGateCore
import AuthGateTools
import Testing

/// How `authgate login` picks its grant (SignInChoice), in process: the rule the README states,
/// for each kind of provider and place; the process-level sign-ins are in InteractiveLoginTests.
@Suite("The sign-in's grant (SignInChoice)")
struct SignInChoiceTests {
    private let desktop = SignInChoice.Place(hasDesktop: true, stdinIsTerminal: true)
    private let terminal = SignInChoice.Place(hasDesktop: false, stdinIsTerminal: true)
    private let pipe = SignInChoice.Place(hasDesktop: false, stdinIsTerminal: false)

    @Test("one way to sign in at most: two of --device, --browser, --client-credentials, or one with a user name or password for login, is a usage error")
    func oneWay() {
        #expect(SignInChoice().problem(password: false) == nil)
        #expect(SignInChoice(device: true).problem(password: false) == nil)
        #expect(SignInChoice().problem(password: true) == nil)
        #expect(SignInChoice(clientCredentials: true, noBrowser: true).problem(password: nil) == nil)
        let login = "Choose one way to sign in: --device, --browser, --client-credentials, or --username/--password-stdin."
        #expect(SignInChoice(device: true).problem(password: true) == login)
        #expect(SignInChoice(device: true, browser: true).problem(password: false) == login)
        #expect(
            SignInChoice(clientCredentials: true, browser: true).problem(password: nil)
                == "Choose one way to sign in: --device, --browser or --client-credentials."
        )
    }

    @Test("a flag decides without asking what the provider offers; a user name or password means the password grant")
    func flags() {
        let all: [Grant] = [.password, .deviceCode, .authorizationCode, .clientCredentials]
        #expect(SignInChoice(device: true).grant(userNamed: false, offered: all, at: desktop) == .deviceCode)
        #expect(SignInChoice(browser: true).grant(userNamed: false, offered: all, at: pipe) == .authorizationCode)
        #expect(SignInChoice().grant(userNamed: true, offered: all, at: desktop) == nil)
        #expect(!SignInChoice(device: true).needsOffer(userNamed: false) && !SignInChoice().needsOffer(userNamed: true))
        #expect(SignInChoice().needsOffer(userNamed: false) && SignInChoice(clientCredentials: true).needsOffer(userNamed: true))
    }

    @Test("--client-credentials: the provider's first service grant, else client_credentials; a provider of service grants only needs no flag")
    func services() {
        #expect(SignInChoice(clientCredentials: true).grant(userNamed: false, offered: [.authorizationCode, .jwtBearer], at: desktop) == .jwtBearer)
        #expect(SignInChoice(clientCredentials: true).grant(userNamed: true, offered: [.password], at: desktop) == .clientCredentials)
        #expect(SignInChoice().grant(userNamed: false, offered: [.clientCredentials], at: terminal) == .clientCredentials)
    }

    @Test("no flag: the browser on a desktop or without a device code; the device code without a password grant or a terminal; else the password")
    func offered() {
        let both: [Grant] = [.authorizationCode, .deviceCode]
        #expect(SignInChoice().grant(userNamed: false, offered: both, at: desktop) == .authorizationCode)
        #expect(SignInChoice().grant(userNamed: false, offered: both, at: terminal) == .deviceCode)
        #expect(SignInChoice().grant(userNamed: false, offered: [.authorizationCode], at: pipe) == .authorizationCode)
        #expect(SignInChoice().grant(userNamed: false, offered: [.password, .deviceCode], at: terminal) == nil)
        #expect(SignInChoice().grant(userNamed: false, offered: [.password, .deviceCode], at: pipe) == .deviceCode)
        #expect(SignInChoice().grant(userNamed: false, offered: [.password], at: desktop) == nil)
        #expect(SignInChoice().grant(userNamed: false, offered: [], at: desktop) == nil, "an unknown provider: the password, which the daemon refuses by name")
    }

    @Test("a desktop is DISPLAY or WAYLAND_DISPLAY, not empty")
    func place() {
        #expect(SignInChoice.Place.current(environment: ["DISPLAY": ":0"]).hasDesktop)
        #expect(SignInChoice.Place.current(environment: ["WAYLAND_DISPLAY": "wayland-0"]).hasDesktop)
        #expect(!SignInChoice.Place.current(environment: ["DISPLAY": ""]).hasDesktop)
        #expect(!SignInChoice.Place.current(environment: [:]).hasDesktop)
    }
}
