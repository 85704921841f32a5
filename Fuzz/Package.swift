// swift-tools-version: 6.0
import PackageDescription

// A libFuzzer target over HotArchive's ZIP reader. It is a package of its own
// because its executable has no `main` (libFuzzer supplies one), so it cannot
// be part of the root package's normal builds. Build and run it with
// `scripts/fuzz` from the repository root (see README.md beside this file).
let package = Package(
    name: "HotUpdateFuzz",
    platforms: [.macOS(.v13)],
    dependencies: [
        .package(name: "HotUpdate", path: "..")
    ],
    targets: [
        // libFuzzer's driver, declared for Swift (the library is linked by `-sanitize=fuzzer`).
        .systemLibrary(name: "CLibFuzzer"),
        .executableTarget(
            name: "ZipFuzz",
            dependencies: [
                "CLibFuzzer",
                .product(name: "HotArchive", package: "HotUpdate"),
                .product(name: "HotCore", package: "HotUpdate"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)])
    ]
)
