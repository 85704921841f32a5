// swift-tools-version: 6.2
import PackageDescription

// The publisher's server: `hot-server` collects the telemetry clients send, reports the health
// of each version, serves the release console and advances health-gated rollouts. A package of
// its own, depending on the library by path, so that an app depending on HotUpdate never
// resolves a server framework. Run from the repository's root:
//
//     swift run --package-path Console hot-server collect --db sqlite:telemetry.db
//
// See README.md beside this file.

/// A product of the HotUpdate library, from the repository this package lives in.
func hot(_ product: String) -> Target.Dependency {
    .product(name: product, package: "HotUpdate")
}

let package = Package(
    name: "HotUpdateConsole",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "hot-server", targets: ["hot-server"]),
        .executable(name: "hot-server-bench", targets: ["hot-server-bench"]),
    ],
    dependencies: [
        .package(name: "HotUpdate", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // The HTTP server; without its default traits (swift-configuration, full Foundation).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        // The two stores: SQLite (one file, no server) and PostgreSQL (for fleets).
        .package(url: "https://github.com/vapor/sqlite-nio", from: "1.13.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // The HTTP parts the collector's connection guard sees (Hummingbird's own).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
    ],
    targets: [
        // The collector, the stores, the report, the console and the rollout policy.
        .target(
            name: "HotServerKit",
            dependencies: [
                hot("HotCore"), hot("HotManifest"), hot("HotVerify"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .executableTarget(
            name: "hot-server",
            dependencies: [
                "HotServerKit", hot("HotCore"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // The collector's throughput against direct inserts, and its memory under a flood.
        .executableTarget(
            name: "hot-server-bench",
            dependencies: [
                "HotServerKit", hot("HotTestServers"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "HotServerTests",
            dependencies: [
                "HotServerKit", hot("HotCore"), hot("HotManifest"), hot("HotVerify"), hot("HotTestServers"),
                hot("HotTesting"), hot("HotTransport"),
            ]
        ),
    ]
)

let sharedSwiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + sharedSwiftSettings
}
