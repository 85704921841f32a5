// swift-tools-version: 6.1
import PackageDescription

// HotUpdate's benchmarks, a package of their own so that the library's manifest names only what
// its products and tests need. Run from the repository's root:
//
//     swift run --package-path Benchmarks -c release hot-bench              # against system tools
//     swift package --package-path Benchmarks benchmark                     # micro-benchmarks
//
// See README.md beside this file.

/// The HotUpdate library, from the repository this package lives in.
func hot(_ product: String) -> Target.Dependency {
    .product(name: product, package: "HotUpdate")
}

let package = Package(
    name: "HotUpdateBenchmarks",
    platforms: [.macOS(.v13), .iOS(.v16)],
    dependencies: [
        .package(name: "HotUpdate", path: ".."),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        // One of the extractors hot-bench compares.
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        // The micro-benchmarks' harness. The trait list replaces the package's default traits
        // (MallocInterposer and RuntimeInterposer): allocation counts stay, and the Linux
        // runtime interposer, a dependency of its own, is left out.
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ],
    targets: [
        // Extraction and packing against system tools, and the engine with many packages.
        .executableTarget(
            name: "hot-bench",
            dependencies: [
                hot("HotCore"), hot("HotManifest"), hot("HotArchive"), hot("HotAssets"), hot("HotStore"),
                hot("HotTransport"), hot("HotVerify"), hot("HotTestServers"), "hot-bench-spawn", "CBenchZstd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // libzstd, the reference `hot-bench zstd` measures HotArchive's zstd decoder against.
        .systemLibrary(
            name: "CBenchZstd", pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]),
        // Spawns each measured tool from a small process, so its peak RSS is its own.
        .executableTarget(name: "hot-bench-spawn"),
        // ZIPFoundation's extractor is an executable of its own, so hot-bench's rows for our
        // backends measure a process that links none of it (a dependency of hot-bench would
        // link it in: build it with `--product hot-bench-zipfoundation`).
        .executableTarget(
            name: "hot-bench-zipfoundation",
            dependencies: [.product(name: "ZIPFoundation", package: "ZIPFoundation")]
        ),
        // Micro-benchmarks in package-benchmark's form (`swift package benchmark`): resolving
        // through a chain of packages, opening a store, digests of a file. The plugin runs every
        // executable target in a folder named Benchmarks, so the tools above live in Sources/.
        .executableTarget(
            name: "HotMicroBenchmarks",
            dependencies: [
                hot("HotCore"), hot("HotManifest"), hot("HotArchive"), hot("HotAssets"), hot("HotStore"),
                hot("HotTransport"), hot("HotVerify"),
                .product(name: "Benchmark", package: "benchmark"),
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Benchmarks/HotMicroBenchmarks",
            plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]
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
