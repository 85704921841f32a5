// swift-tools-version: 6.1
import PackageDescription

/// Platforms where the C libraries come from the system (apt, pkg-config).
/// Apple platforms link only what their SDKs ship (zlib, libcurl on macOS, the system
/// frameworks) and swift-crypto: the libraries no Apple SDK has (libzstd, libdeflate,
/// libarchive, libcrypto) are conditioned on these platforms, whatever the traits.
/// `scripts/link-audit` checks it.
let nonApple: [Platform] = [.linux, .android, .windows, .openbsd, .wasi]

/// The command-line parser of `hot` and the examples.
let argumentParser: Target.Dependency = .product(name: "ArgumentParser", package: "swift-argument-parser")

/// Apple platforms: swift-crypto's `Crypto` re-exports CryptoKit there.
let apple: [Platform] = [.macOS, .iOS, .tvOS, .watchOS, .visionOS, .macCatalyst]

/// swift-crypto's products, used by HotVerify and HotArchive (WinZip AES) on Apple platforms
/// always, and elsewhere with the `SwiftCrypto` trait.
let swiftCrypto: [Target.Dependency] = ["Crypto", "_CryptoExtras"].flatMap { product -> [Target.Dependency] in
    [
        .product(name: product, package: "swift-crypto", condition: .when(platforms: apple)),
        .product(
            name: product,
            package: "swift-crypto",
            condition: .when(platforms: nonApple, traits: ["SwiftCrypto"])
        ),
    ]
}

/// The traits on unless a build says otherwise: every C library its platform has.
let defaultTraits: Set<String> = ["LibArchive", "Curl", "Zstd", "Deflate", "Libcrypto", "PKCS11"]

let package = Package(
    name: "HotUpdate",
    platforms: [.macOS(.v13), .iOS(.v16), .tvOS(.v16), .watchOS(.v9), .visionOS(.v1)],
    products: [
        // The standard parts under one import, and the AppUpdater preset.
        .library(name: "HotUpdate", targets: ["HotUpdate"]),
        .library(name: "HotCore", targets: ["HotCore"]),
        .library(name: "HotManifest", targets: ["HotManifest"]),
        .library(name: "HotTransport", targets: ["HotTransport"]),
        .library(name: "HotArchive", targets: ["HotArchive"]),
        .library(name: "HotVerify", targets: ["HotVerify"]),
        .library(name: "HotStore", targets: ["HotStore"]),
        .library(name: "HotAssets", targets: ["HotAssets"]),
        .library(name: "HotTesting", targets: ["HotTesting"]),
        // The publisher's side: release keys wherever they live (PEM files, PKCS#11 tokens).
        .library(name: "HotPublish", targets: ["HotPublish"]),
        .library(name: "HotTestServers", targets: ["HotTestServers"]),
        .executable(name: "hot", targets: ["hot"]),
        .executable(name: "MinimalPatch", targets: ["MinimalPatch"]),
        .executable(name: "ScriptPatches", targets: ["ScriptPatches"]),
        .executable(name: "ResourcePacks", targets: ["ResourcePacks"]),
        .executable(name: "WebOfflinePackages", targets: ["WebOfflinePackages"]),
        .executable(name: "LaunchGuard", targets: ["LaunchGuard"]),
    ],
    // Each trait that links a C library applies only where the platform has it: the default
    // traits change nothing on Apple platforms but libcurl on macOS. Without the defaults and
    // with `SwiftCrypto` (`--disable-default-traits --traits SwiftCrypto`), Linux builds what
    // Apple platforms build: zlib, swift-crypto, URLSession.
    traits: [
        .trait(
            name: "LibArchive",
            description:
                "LibArchiveUnarchiver: ZIP entries in methods our reader lacks (bzip2, LZMA, zstd, xz, AES) decoded by libarchive (links libarchive; not on Apple platforms)."
        ),
        .trait(
            name: "Curl",
            description:
                "CurlTransport: HTTP over libcurl (links libcurl; Linux and macOS); without it HTTP goes through URLSession."
        ),
        .trait(
            name: "Zstd",
            description:
                "ZstdPatcher.makePatch: binary patches made by libzstd's encoder, for `hot pack` (links libzstd; not on Apple platforms). Applying patches needs no library."
        ),
        .trait(
            name: "Deflate",
            description:
                "The ZIP reader decodes small deflate entries whole and computes CRC-32 with libdeflate (links libdeflate; not on Apple platforms); zlib without it."
        ),
        .trait(
            name: "Libcrypto",
            description:
                "HotVerify and the ZIP reader's and writer's WinZip AES over libcrypto (OpenSSL 3; not on Apple platforms, which use swift-crypto). SwiftCrypto wins when both are on; with neither, off Apple platforms, CryptoVerifier and CryptoSigner throw `unsupported` and AES entries `unsupportedEncryption`."
        ),
        .trait(
            name: "PKCS11",
            description:
                "PKCS11Signer: release keys kept in a PKCS#11 token (an HSM, SoftHSM2, a smart card), named by an RFC 7512 URI, through p11-kit (links libp11-kit; not on Apple platforms). Without it, PKCS11Signer throws `unsupported`."
        ),
        .trait(
            name: "SwiftCrypto",
            description:
                "HotVerify and WinZip AES over swift-crypto (the code Apple platforms run) instead of libcrypto off Apple platforms."
        ),
        .trait(
            name: "FaultPoints",
            description:
                "Named fault points for the kill tests: the process aborts where HOT_ABORT_AT says. Off by default; scripts/test and scripts/kill-harness turn it on. A build without it holds no fault point and never reads HOT_ABORT_AT."
        ),
        .trait(
            name: "defaults",
            description:
                "The default traits under a name that can stand beside others: `--traits defaults,SwiftCrypto`.",
            enabledTraits: defaultTraits
        ),
        .default(enabledTraits: defaultTraits),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-crypto", "3.12.3"..<"5.0.0"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        // `swift package generate-documentation`; adds no code to the products.
        .package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"),
    ],
    targets: [
        // System libraries.
        // <sys/xattr.h>, which the C library's Swift module leaves out: a header, nothing to link.
        .systemLibrary(name: "CHotXattr"),
        .systemLibrary(
            name: "CHotZlib",
            pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]
        ),
        .systemLibrary(
            name: "CHotArchive",
            pkgConfig: "libarchive",
            providers: [.apt(["libarchive-dev"]), .brew(["libarchive"])]
        ),
        .systemLibrary(
            name: "CHotCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]
        ),
        .systemLibrary(
            name: "CHotCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]
        ),
        .systemLibrary(
            name: "CHotZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]
        ),
        .systemLibrary(
            name: "CHotDeflate",
            pkgConfig: "libdeflate",
            providers: [.apt(["libdeflate-dev"]), .brew(["libdeflate"])]
        ),
        .systemLibrary(
            name: "CHotP11Kit",
            pkgConfig: "p11-kit-1",
            providers: [.apt(["libp11-kit-dev"])]
        ),

        // Abstractions and the engine.
        .target(
            name: "HotCore",
            dependencies: ["CHotXattr", .product(name: "Logging", package: "swift-log")]
        ),

        // What servers speak: the signed native manifest and its trust state, and the sources for
        // older servers' formats.
        .target(
            name: "HotManifest",
            dependencies: ["HotCore", .product(name: "Logging", package: "swift-log")]
        ),

        // Implementations: each points into HotCore (and HotVerify into HotManifest, whose
        // `Signer` it implements), never at another.
        .target(
            name: "HotTransport",
            dependencies: [
                "HotCore",
                .target(name: "CHotCurl", condition: .when(platforms: nonApple + [.macOS], traits: ["Curl"])),
            ]
        ),
        .target(
            name: "HotArchive",
            dependencies: [
                "HotCore", "CHotZlib",
                .target(name: "CHotArchive", condition: .when(platforms: nonApple, traits: ["LibArchive"])),
                // The patch encoder (`hot pack`); patches are applied by HotArchive's own decoder.
                .target(name: "CHotZstd", condition: .when(platforms: nonApple, traits: ["Zstd"])),
                // Whole-entry inflate and fast CRC-32; zlib's streaming inflate without it.
                .target(name: "CHotDeflate", condition: .when(platforms: nonApple, traits: ["Deflate"])),
                // WinZip AES (AES-CTR, HMAC-SHA1, PBKDF2) in the ZIP reader and writer: libcrypto off
                // Apple platforms, swift-crypto on them and with the `SwiftCrypto` trait (it wins).
                .target(name: "CHotCrypto", condition: .when(platforms: nonApple, traits: ["Libcrypto"])),
            ] + swiftCrypto
        ),
        .target(
            name: "HotVerify",
            dependencies: [
                "HotCore", "HotManifest",
                .target(name: "CHotCrypto", condition: .when(platforms: nonApple, traits: ["Libcrypto"])),
            ] + swiftCrypto
        ),
        .target(name: "HotStore", dependencies: ["HotCore"]),
        // The publisher's side; no client product depends on it.
        .target(
            name: "HotPublish",
            dependencies: [
                "HotCore", "HotManifest", "HotVerify", "HotArchive", "HotStore", "HotTransport",
                .target(name: "CHotP11Kit", condition: .when(platforms: nonApple, traits: ["PKCS11"])),
                // Publishing to S3 signs its requests with libcurl's SigV4 (with the Curl trait).
                .target(name: "CHotCurl", condition: .when(platforms: nonApple + [.macOS], traits: ["Curl"])),
            ]
        ),
        .target(
            name: "HotAssets",
            dependencies: ["HotCore", .product(name: "Logging", package: "swift-log")]
        ),
        .target(name: "HotTesting", dependencies: ["HotCore"]),
        // nginx, moto and a raw HTTP server on 127.0.0.1, and subprocesses, for tests that want
        // the network; `TransportConformance.nginx` serves the transport suite's fixtures.
        .target(name: "HotTestServers", dependencies: ["HotCore", "HotTesting"]),

        // The umbrella: re-exports the standard parts; AppUpdater builds an updater from them.
        .target(
            name: "HotUpdate",
            dependencies: [
                "HotCore", "HotManifest", "HotTransport", "HotArchive", "HotVerify", "HotStore", "HotAssets",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),

        // The publisher's and operator's tool.
        .executableTarget(
            name: "hot",
            dependencies: [
                "HotUpdate", "HotCore", "HotManifest", "HotTransport", "HotArchive", "HotVerify", "HotStore",
                "HotAssets", "HotPublish",
                argumentParser,
                // `hot publish` signs its S3 requests with libcurl's SigV4 (with the Curl trait).
                .target(name: "CHotCurl", condition: .when(platforms: nonApple + [.macOS], traits: ["Curl"])),
            ]
        ),

        // Examples.
        .executableTarget(
            name: "MinimalPatch",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/MinimalPatch",
            exclude: ["Patches", "README.md"],
            resources: [.copy("Bundle")]
        ),
        .executableTarget(
            name: "ScriptPatches",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/ScriptPatches",
            exclude: ["Patches", "DebugPatch", "README.md", "make-patch-list"]
        ),
        .executableTarget(
            name: "ResourcePacks",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/ResourcePacks",
            exclude: ["README.md", "make-repository"],
            resources: [.copy("Bundle")]
        ),
        .executableTarget(
            name: "WebOfflinePackages",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/WebOfflinePackages",
            exclude: ["README.md", "make-repository", "Modules"]
        ),
        .executableTarget(
            name: "LaunchGuard",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/LaunchGuard",
            exclude: ["README.md"]
        ),

        // Tests.
        .testTarget(
            name: "HotCoreTests",
            dependencies: ["HotCore", "HotTesting", "HotTestServers", .product(name: "Logging", package: "swift-log")]
        ),
        .testTarget(name: "HotManifestTests", dependencies: ["HotManifest", "HotCore", "HotTesting"]),
        .testTarget(name: "HotArchiveTests", dependencies: ["HotArchive", "HotCore", "HotTesting", "HotTestServers"]),
        .testTarget(
            name: "HotTransportTests",
            dependencies: ["HotTransport", "HotCore", "HotTesting", "HotTestServers", "HotVerify"]
        ),
        .testTarget(name: "HotVerifyTests", dependencies: ["HotVerify", "HotCore", "HotTesting", "HotTestServers"]),
        .testTarget(
            name: "HotPublishTests",
            dependencies: ["HotPublish", "HotCore", "HotManifest", "HotVerify", "HotTesting", "HotTestServers"]
        ),
        .testTarget(name: "HotStoreTests", dependencies: ["HotStore", "HotCore", "HotTesting", "HotTestServers"]),
        .testTarget(
            name: "HotAssetsTests",
            dependencies: [
                "HotAssets", "HotCore", "HotTesting", "HotTestServers", .product(name: "Logging", package: "swift-log"),
            ]
        ),
        // Every swift snippet of the README and the DocC articles, type-checked against the
        // products as the build made them (in the default and the Apple configuration).
        .testTarget(name: "DocSnippetTests", dependencies: ["HotUpdate", "HotPublish", "HotTesting", "HotTestServers"]),
        // An adopter's view: its own adapters against the public conformance suites.
        .testTarget(name: "AdapterConformanceTests", dependencies: ["HotCore", "HotTesting"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "HotUpdate", "HotCore", "HotManifest", "HotTransport", "HotArchive", "HotVerify", "HotStore",
                "HotAssets", "HotTesting",
                "HotTestServers",
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
    ]
)

// The publisher's server (`Console/`: `hot-server`, its tests and its benchmark) and the
// benchmarks (`Benchmarks/`: `hot-bench`, the micro-benchmarks) join the package only when
// `HOTUPDATE_DEV=1` is set, as scripts/test sets it: one build compiles the library once for the
// library's tests, the server's and the benchmarks'. An app that depends on HotUpdate never sets
// it, so its `Package.resolved` holds swift-log, swift-crypto (and swift-asn1),
// swift-argument-parser and swift-docc-plugin, never a server framework. Run them with the
// variable set, from the repository's root:
//
//     HOTUPDATE_DEV=1 swift run -c release hot-server collect --db sqlite:telemetry.db
//     HOTUPDATE_DEV=1 swift run -c release hot-bench
//     HOTUPDATE_DEV=1 swift package benchmark
//
// See Console/README.md and Benchmarks/README.md.
if Context.environment["HOTUPDATE_DEV"] == "1" {
    /// Hummingbird 2 and the NIO stores need macOS 14 and its peers; the library's floor stays.
    package.platforms = [.macOS(.v14), .iOS(.v17), .tvOS(.v17), .watchOS(.v10), .visionOS(.v1)]
    package.dependencies += [
        // The console's HTTP server; without its default traits (swift-configuration, full
        // Foundation).
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1", traits: []),
        // The console's two stores: SQLite (one file, no server) and PostgreSQL (for fleets).
        .package(url: "https://github.com/vapor/sqlite-nio", from: "1.13.2"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        // The HTTP parts the collector's connection guard sees (Hummingbird's own).
        .package(url: "https://github.com/apple/swift-nio-extras.git", from: "1.35.2"),
        // One of the extractors hot-bench compares.
        .package(url: "https://github.com/weichsel/ZIPFoundation", from: "0.9.20"),
        // The micro-benchmarks' harness. The trait list replaces the package's default traits
        // (MallocInterposer and RuntimeInterposer): allocation counts stay, and the Linux
        // runtime interposer, a dependency of its own, is left out.
        .package(url: "https://github.com/ordo-one/benchmark", from: "1.38.1", traits: ["MallocInterposer"]),
    ]
}
// `HOTUPDATE_TEST_TARGETS=A,B` (with HOTUPDATE_DEV=1) keeps only those test targets and leaves the
// console, the benchmarks and the examples out, with the same dependencies, so `Package.resolved`
// stays as it is: scripts/test-traits builds the Apple configuration's tests with the suites whose
// code differs with the traits, not every suite again.
let testTargets = Context.environment["HOTUPDATE_TEST_TARGETS"].map { Set($0.split(separator: ",").map(String.init)) }
if let kept = testTargets {
    package.targets.removeAll { $0.type == .test && !kept.contains($0.name) }
    // The examples compile alike whatever the traits (they use the umbrella, and no line of
    // theirs depends on a trait): the default build compiles and runs them.
    let examples: Set<String> = ["MinimalPatch", "ScriptPatches", "ResourcePacks", "WebOfflinePackages", "LaunchGuard"]
    package.targets.removeAll { examples.contains($0.name) }
    package.products.removeAll { examples.contains($0.name) }
}
if Context.environment["HOTUPDATE_DEV"] == "1" && testTargets == nil {
    let logging: Target.Dependency = .product(name: "Logging", package: "swift-log")
    package.products += [
        .executable(name: "hot-server", targets: ["hot-server"]),
        .executable(name: "hot-server-bench", targets: ["hot-server-bench"]),
        .executable(name: "hot-bench", targets: ["hot-bench"]),
        .executable(name: "hot-bench-spawn", targets: ["hot-bench-spawn"]),
        .executable(name: "hot-bench-zipfoundation", targets: ["hot-bench-zipfoundation"]),
        .executable(name: "HotMicroBenchmarks", targets: ["HotMicroBenchmarks"]),
    ]
    package.targets += [
        // The collector, the stores, the report, the console and the rollout policy.
        .target(
            name: "HotServerKit",
            dependencies: [
                "HotCore", "HotManifest", "HotVerify", "HotPublish", "HotTransport",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "SQLiteNIO", package: "sqlite-nio"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                logging,
            ],
            path: "Console/Sources/HotServerKit"
        ),
        .executableTarget(
            name: "hot-server",
            dependencies: ["HotServerKit", "HotCore", argumentParser, logging],
            path: "Console/Sources/hot-server"
        ),
        // The collector's throughput against direct inserts, and its memory under a flood.
        .executableTarget(
            name: "hot-server-bench",
            dependencies: ["HotServerKit", "HotTestServers", argumentParser, logging],
            path: "Console/Sources/hot-server-bench"
        ),
        .testTarget(
            name: "HotServerTests",
            dependencies: [
                "HotServerKit", "HotPublish", "HotCore", "HotManifest", "HotVerify", "HotTestServers", "HotTesting", "HotTransport",
            ],
            path: "Console/Tests/HotServerTests"
        ),

        // Extraction and packing against system tools, and the engine with many packages.
        .executableTarget(
            name: "hot-bench",
            dependencies: [
                "HotCore", "HotManifest", "HotArchive", "HotAssets", "HotStore", "HotTransport", "HotVerify",
                "HotTestServers", "hot-bench-spawn", "CBenchZstd", argumentParser, logging,
            ],
            path: "Benchmarks/Sources/hot-bench"
        ),
        // libzstd, the reference `hot-bench zstd` measures HotArchive's zstd decoder against.
        .systemLibrary(
            name: "CBenchZstd",
            path: "Benchmarks/Sources/CBenchZstd",
            pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]
        ),
        // Spawns each measured tool from a small process, so its peak RSS is its own.
        .executableTarget(name: "hot-bench-spawn", path: "Benchmarks/Sources/hot-bench-spawn"),
        // ZIPFoundation's extractor is an executable of its own, so hot-bench's rows for our
        // backends measure a process that links none of it.
        .executableTarget(
            name: "hot-bench-zipfoundation",
            dependencies: [.product(name: "ZIPFoundation", package: "ZIPFoundation")],
            path: "Benchmarks/Sources/hot-bench-zipfoundation"
        ),
        // Micro-benchmarks in package-benchmark's form (`swift package benchmark`): resolving
        // through a chain of packages, opening a store, digests of a file. The command plugin runs
        // every executable target in a folder named Benchmarks, so the tools above live in
        // Sources/.
        .executableTarget(
            name: "HotMicroBenchmarks",
            dependencies: [
                "HotCore", "HotManifest", "HotArchive", "HotAssets", "HotStore", "HotTransport", "HotVerify",
                .product(name: "Benchmark", package: "benchmark"), logging,
            ],
            // No BenchmarkPlugin: BenchmarkRunner.swift is the entry point it would generate (its
            // tool, rebuilt whenever the package is loaded again, made every build compile the
            // library anew).
            path: "Benchmarks/Benchmarks/HotMicroBenchmarks"
        ),
    ]
}

// Shared settings, applied once to every target that compiles Swift.
let sharedSwiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + sharedSwiftSettings
}
