// swift-tools-version: 6.0
import PackageDescription

// libFuzzer targets over HotArchive's ZIP reader (ZipFuzz) and its zstd decoder
// (ZstdFuzz, with libzstd as the oracle). It is a package of its own because its
// executables have no `main` (libFuzzer supplies one), so they cannot be part of
// the root package's normal builds. Build and run them with `scripts/fuzz` and
// `scripts/fuzz zstd` from the repository root (see README.md beside this file).
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
            swiftSettings: [.swiftLanguageMode(.v6)]),
        // The system libzstd (libzstd-dev), wrapped in one C function and linked through this
        // target's module map: the oracle ZstdFuzz compares the decoder with.
        .target(name: "CZstdOracle", linkerSettings: [.linkedLibrary("zstd")]),
        .executableTarget(
            name: "ZstdFuzz",
            dependencies: [
                "CLibFuzzer", "CZstdOracle",
                .product(name: "HotArchive", package: "HotUpdate"),
                .product(name: "HotCore", package: "HotUpdate"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]),
    ]
)
