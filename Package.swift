// swift-tools-version: 6.1
import PackageDescription

let strictSettings: [SwiftSetting] = [
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
]

let package = Package(
    name: "authgate",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "authgated", targets: ["authgated"]),
        .executable(name: "authgate", targets: ["authgate"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
    ],
    targets: [
        // Domain: providers, configuration, tokens, sessions, errors. No NIO, no curl.
        .target(
            name: "AuthGateCore",
            dependencies: [.product(name: "Logging", package: "swift-log")],
            swiftSettings: strictSettings
        ),
        // JSON-RPC 2.0 wire types, method names, error codes and a small blocking client;
        // shared by the daemon, the CLI and the tests.
        .target(
            name: "AuthGateRPC",
            dependencies: ["AuthGateCore"],
            swiftSettings: strictSettings
        ),
        // Services (RPC server, provider registry, sessions) and the composition root.
        .target(
            name: "AuthGateDaemon",
            dependencies: [
                "AuthGateCore",
                "AuthGateRPC",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "authgated",
            dependencies: [
                "AuthGateDaemon",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        .executableTarget(
            name: "authgate",
            dependencies: [
                "AuthGateRPC",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "AuthGateCoreTests",
            dependencies: ["AuthGateCore"],
            resources: [.copy("Fixtures")],
            swiftSettings: strictSettings
        ),
        .testTarget(
            name: "AuthGateDaemonTests",
            dependencies: ["AuthGateCore", "AuthGateRPC", "AuthGateDaemon"],
            swiftSettings: strictSettings
        ),
    ],
    swiftLanguageModes: [.v6]
)
