// swift-tools-version: 6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "authgate",
    products: [
        .executable(name: "authgate", targets: ["authgate"]),
        .library(name: "AuthGateClient", targets: ["AuthGateClient"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/vapor/jwt-kit.git", from: "5.7.1"),
        .package(url: "https://github.com/apple/swift-collections.git", from: "1.1.0"),
        .package(url: "https://github.com/apple/swift-system.git", from: "1.7.0"),
        // AES-GCM for the session store; jwt-kit already depends on it (4.x).
        .package(url: "https://github.com/apple/swift-crypto.git", "3.12.3"..<"5.0.0"),
        // The daemon's metrics: swift-prometheus's registry and exposition (on swift-metrics' handler types).
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
    ],
    targets: [
        // Domain: providers, configuration, tokens, sessions, errors. No NIO, no curl.
        .target(
            name: "AuthGateCore",
            dependencies: [
                // P-256 for the keys that DPoP binds a session's tokens to (RFC 9449).
                .product(name: "Crypto", package: "swift-crypto")
            ],
            swiftSettings: strictSettings
        ),
        // libcurl, opened with dlopen on first use instead of linked, so that a process that
        // makes no HTTP request loads none of its libraries; typed wrappers of the variadic
        // curl_easy_setopt (include/ccurl.h). Its headers: libcurl4-openssl-dev.
        .target(name: "CCurl"),
        // Linux calls Swift's Glibc module lacks (prctl), as static inline C functions.
        .target(name: "CLinux"),
        // HTTPTransport and its libcurl implementation: the only code that touches curl.
        .target(
            name: "AuthGateHTTP",
            dependencies: [
                "AuthGateCore", "CCurl",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // OAuth 2.0 / OpenID Connect: discovery, the token endpoint and its grants, revocation,
        // ID-token verification, and the IdentityProvider for real servers.
        .target(
            name: "AuthGateOAuth",
            dependencies: [
                "AuthGateCore",
                "AuthGateHTTP",
                .product(name: "JWTKit", package: "jwt-kit"),
                .product(name: "Logging", package: "swift-log"),
                // SHA-256 for the PKCE code challenge (RFC 7636 §4.2); the client assertions'
                // EC, RSA and HMAC signatures (RFC 7523).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // JSON-RPC 2.0 wire types, method names, error codes and a small blocking client;
        // shared by the daemon, the CLI and the tests. What only the CLI reads is AuthGateTools'.
        .target(
            name: "AuthGateRPC",
            dependencies: ["AuthGateCore"],
            swiftSettings: strictSettings
        ),
        // The socket server: both doors (the front door's thread with its connection table, and
        // NIO's pipelines with the line connection's state machine), limits, deadlines, peer
        // credentials, and the one-request connections of the small HTTP listeners. It moves
        // lines; what they mean is the daemon's, behind two protocols (ServedLines.swift).
        .target(
            name: "AuthGateServer",
            dependencies: [
                "CLinux",
                "AuthGateCore",
                "AuthGateRPC",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        // The daemon's domain (sessions, storage, providers, sign-ins, methods, watches, consent,
        // metrics) and the composition root.
        .target(
            name: "AuthGateDaemon",
            dependencies: [
                "CLinux",
                "AuthGateCore",
                "AuthGateRPC",
                "AuthGateOAuth",
                "AuthGateHTTP",
                "AuthGateServer",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                // The loopback redirect listener of the authorization-code flow.
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "HeapModule", package: "swift-collections"),
                .product(name: "SystemPackage", package: "swift-system"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Prometheus", package: "swift-prometheus"),
            ],
            swiftSettings: strictSettings
        ),
        // The CLI's logic, tested in process (AuthGateToolsTests, in the same folders): the
        // daemon calls through AuthGateClient and the one failure type (DaemonCalls), sign-in
        // (SignIn: the grant's choice, the interactive and point-of-use flows, registration),
        // git's, docker's and kubectl's helpers (Helpers), the sink, exec's supervisor, token's
        // calls (TokenDelivery), provider add/remove/test (ProviderAdmin), the terminal and the
        // QR code (Terminal). The `authgate` executable parses commands, prints, and keeps
        // what only a process has (exec, signals).
        .target(
            name: "AuthGateTools",
            dependencies: ["AuthGateClient", "AuthGateCore", "AuthGateRPC", "CLinux"],
            swiftSettings: strictSettings
        ),
        // `authgate proxy`: a local reverse proxy adding the session's token (and a DPoP proof) to
        // every request for one upstream; NIO's HTTP/1 codec towards clients, libcurl upstream.
        .target(
            name: "AuthGateProxy",
            dependencies: [
                "AuthGateClient", "AuthGateCore", "AuthGateHTTP", "AuthGateServer", "CLinux",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // Every program of authgate in one executable, chosen by the name it is run by
        // (AuthGateTools' Invocation): `authgate`, the daemon `authgated`, and git's and docker's
        // credential helpers; installed once, with links for the other names.
        .executableTarget(
            name: "authgate",
            dependencies: [
                "AuthGateTools", "AuthGateClient", "AuthGateRPC", "AuthGateProxy", "AuthGateDaemon", "AuthGateServer", "CLinux",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        // The benchmark (scripts/bench): a cheap load generator, process timing, memory and
        // start-up measurements against the release daemon.
        .executableTarget(
            name: "authgate-bench",
            dependencies: [
                "AuthGateClient", "AuthGateCore", "AuthGateRPC", "CLinux",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "AuthGateToolsTests",
            dependencies: ["AuthGateTools", "AuthGateCore", "AuthGateRPC", "AuthGateTestSupport"],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "AuthGateCoreTests",
            dependencies: ["AuthGateCore"],
            resources: [.copy("Fixtures")],
            swiftSettings: strictSettings
        ),
        // The client library for Swift programs, which the CLI uses too.
        .target(
            name: "AuthGateClient",
            dependencies: [
                "AuthGateCore", "AuthGateRPC",
                // SHA-256: HTTPRetryPolicy remembers refused tokens by their digest.
                .product(name: "Crypto", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // Entry points into every parser of untrusted bytes, for scripts/fuzz (libFuzzer) and the
        // tests' replay of the committed inputs. It uses @testable imports, so its source is for
        // builds with testability only (debug, or AUTHGATE_TESTABLE_RELEASE below): a plain
        // release build of the whole package builds it empty.
        .target(
            name: "AuthGateFuzzing",
            dependencies: [
                "AuthGateCore", "AuthGateRPC", "AuthGateOAuth", "AuthGateDaemon", "AuthGateHTTP", "AuthGateServer", "AuthGateTools",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // What the test targets share: waiting on a condition, scratch directories, a child's
        // output, the injected clock, a log kept as text. No Testing: it is built with the package.
        .target(
            name: "AuthGateTestSupport",
            dependencies: [.product(name: "Logging", package: "swift-log")],
            path: "Tests/AuthGateTestSupport",
            swiftSettings: strictSettings
        ),
        // The socket server in process: the connection table, the state machines, the NIO
        // handlers on EmbeddedChannel, a real socket where the kernel's behaviour is the point;
        // the daemon's answers are stand-ins.
        .testTarget(
            name: "AuthGateServerTests",
            dependencies: [
                "AuthGateCore", "AuthGateRPC", "AuthGateServer", "AuthGateTestSupport", "CLinux",
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // AuthGateRPC in process: the wire codec both ways, what it refuses, the reason table,
        // where a client finds the socket.
        .testTarget(
            name: "AuthGateRPCTests",
            dependencies: ["AuthGateCore", "AuthGateRPC", "AuthGateTestSupport"],
            swiftSettings: strictSettings
        ),
        // AuthGateHTTP in process: the request policy, Retry-After, and CurlTransport against a
        // plain HTTP stand-in on loopback (limits, timeouts, what reaches the server).
        .testTarget(
            name: "AuthGateHTTPTests",
            dependencies: ["AuthGateCore", "AuthGateHTTP", "AuthGateTestSupport"],
            swiftSettings: strictSettings
        ),
        // AuthGateOAuth in process: every grant and the token endpoint's reading of answers
        // against a scripted transport, ID tokens signed with keys made by the test, proofs,
        // client registration, metadata.
        .testTarget(
            name: "AuthGateOAuthTests",
            dependencies: [
                "AuthGateCore", "AuthGateHTTP", "AuthGateOAuth", "AuthGateTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Crypto", package: "swift-crypto"),
                // RSA keys for the ID tokens the tests sign (RS256).
                .product(name: "_CryptoExtras", package: "swift-crypto"),
            ],
            swiftSettings: strictSettings
        ),
        // AuthGateClient in process, against a stand-in daemon on a Unix socket: calls, error
        // answers, a closed connection, watches and the follower; the HTTP retry rule.
        .testTarget(
            name: "AuthGateClientTests",
            dependencies: ["AuthGateClient", "AuthGateCore", "AuthGateRPC", "AuthGateTestSupport"],
            swiftSettings: strictSettings
        ),
        // AuthGateProxy in process: what it forwards and how fields change, the kernel's socket
        // table read for a caller's uid, the flags' values and what they resolve to, the stop on
        // a signal.
        .testTarget(
            name: "AuthGateProxyTests",
            dependencies: [
                "AuthGateClient", "AuthGateProxy", "AuthGateTestSupport",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strictSettings
        ),
        // The daemon's logic in process: no daemon, no test server, seconds.
        .testTarget(
            name: "AuthGateDaemonTests",
            dependencies: [
                "AuthGateCore", "AuthGateRPC", "AuthGateOAuth", "AuthGateDaemon", "AuthGateServer", "AuthGateFuzzing", "AuthGateClient",
                "AuthGateTestSupport",
                // Token watchers writing to an EmbeddedChannel.
                .product(name: "NIOEmbedded", package: "swift-nio"),
                // Event loops, where the tests check which thread work runs on.
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
        // The built daemon and CLI as processes, through the real socket, against the test
        // identity providers (Tests/idp) and the real tools (git, kubectl, docker, nginx, sshd…).
        .testTarget(
            name: "AuthGateSystemTests",
            dependencies: [
                "AuthGateCore", "AuthGateRPC", "AuthGateOAuth", "AuthGateDaemon", "AuthGateServer", "AuthGateClient", "AuthGateTools",
                "AuthGateTestSupport",
                // Hashes candidate strings against a PKCE code challenge (no verifier in logs).
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The one build of the full test run (scripts/test sets AUTHGATE_TESTABLE_RELEASE=1 for a
// release build with the tests): this package's modules compiled with testability (the tests'
// `@testable` imports; the fuzz entry points, which use them, are compiled too: the condition
// AUTHGATE_TESTABLE), and the one executable the Debian package ships linked with the Swift
// runtime statically (it runs where no Swift is installed), while the test bundle links it
// dynamically: `--static-swift-stdlib` would link the test bundle statically too, and Swift
// Testing has no static library. The dependencies keep their ordinary flags. A static
// FoundationEssentials needs _FoundationCollections and _FoundationCShims, which a module
// compiled for the dynamic runtime does not name: they are given to the linker here. The
// executable is linked by lld: it packs the ~80,000 relative relocations of a
// position-independent executable into a table of 13 KB instead of 1.9 MB (DT_RELR, glibc
// 2.36: Debian 12); it exports `main` only (Sources/link/exports.map says why) and carries
// libstdc++ and libgcc's unwinder statically (Sources/link/libstdc++.so says why); the
// functions start-up runs come first in its code, in the order they run
// (Sources/link/startup-order.txt, written by scripts/order-startup).
if Context.environment["AUTHGATE_TESTABLE_RELEASE"] == "1" {
    for index in package.targets.indices where package.targets[index].type == .regular && package.targets[index].name.hasPrefix("AuthGate") {
        package.targets[index].swiftSettings =
            (package.targets[index].swiftSettings ?? []) + [.unsafeFlags(["-enable-testing"]), .define("AUTHGATE_TESTABLE")]
    }
    // The tests themselves need no optimizer, and each target is compiled whole: one -Onone
    // job type-checks its files once, where a job per file (the debug build's way, which is
    // what keeps a subject's warm run short) type-checks the declarations of the others again
    // each time. Measured on the system tests (-stats-output-dir): 204 s of compiler time file
    // by file, 101 s whole; whole-module -O was ~7 min.
    for index in package.targets.indices where package.targets[index].type == .test {
        package.targets[index].swiftSettings = (package.targets[index].swiftSettings ?? []) + [.unsafeFlags(["-Onone"])]
    }
    for index in package.targets.indices where package.targets[index].name == "authgate" {
        package.targets[index].linkerSettings =
            (package.targets[index].linkerSettings ?? []) + [
                .unsafeFlags([
                    "-static-stdlib", "-l_FoundationCollections", "-l_FoundationCShims",
                    "-Xlinker", "--version-script=\(Context.packageDirectory)/Sources/link/exports.map",
                    "-use-ld=lld", "-Xlinker", "-z", "-Xlinker", "pack-relative-relocs",
                    "-L\(Context.packageDirectory)/Sources/link", "-Xclang-linker", "-static-libgcc",
                    "-Xlinker", "--symbol-ordering-file=\(Context.packageDirectory)/Sources/link/startup-order.txt",
                    "-Xlinker", "--no-warn-symbol-ordering",
                ])
            ]
    }
}

// Coverage-guided fuzzing (libFuzzer), declared only for `scripts/fuzz`, which sets
// AUTHGATE_FUZZ=1: one executable, `authgate-fuzz TARGET …`, and this package's own Swift
// modules compiled with -sanitize=fuzzer,address and without the optimizer in either
// configuration (as fast to fuzz, measured: the costly targets run the same inputs per second,
// and a third of the build time); in release each module is one job, which type-checks its
// files once (48 s against 64 s file by file, in the full run's build directory). The
// dependencies keep their ordinary flags, so a scratch path that already holds them (the full
// test run's release build) rebuilds only this package's modules: coverage is collected where
// our parsers are, and the build takes under a minute instead of the dependencies' cold build.
if Context.environment["AUTHGATE_FUZZ"] == "1" {
    let fuzzing: [SwiftSetting] = [.unsafeFlags(["-sanitize=fuzzer,address", "-Onone"])]
    for index in package.targets.indices where package.targets[index].type == .regular && package.targets[index].name.hasPrefix("AuthGate") {
        package.targets[index].swiftSettings = (package.targets[index].swiftSettings ?? []) + fuzzing
    }
    package.targets.append(
        .executableTarget(
            name: "authgate-fuzz",
            dependencies: ["AuthGateFuzzing", "CLinux"],
            path: "Tests/Fuzz/Driver",
            // Library mode: the entry points are @_cdecl functions (see Driver.swift).
            swiftSettings: strictSettings + fuzzing + [.unsafeFlags(["-parse-as-library"])],
            linkerSettings: [.unsafeFlags(["-sanitize=fuzzer,address"])]
        )
    )
}
