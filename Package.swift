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
        .product(name: product, package: "swift-crypto", condition: .when(platforms: nonApple, traits: ["SwiftCrypto"])),
    ]
}

/// The traits on unless a build says otherwise: every C library its platform has.
let defaultTraits: Set<String> = ["LibArchive", "Curl", "Zstd", "Deflate", "Libcrypto"]

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
            description: "LibArchiveUnarchiver: ZIP entries in methods our reader lacks (bzip2, LZMA, zstd, xz, AES) decoded by libarchive (links libarchive; not on Apple platforms)."),
        .trait(
            name: "Curl",
            description: "CurlTransport: HTTP over libcurl (links libcurl; Linux and macOS); without it HTTP goes through URLSession."),
        .trait(
            name: "Zstd",
            description: "ZstdPatcher.makePatch: binary patches made by libzstd's encoder, for `hot pack` (links libzstd; not on Apple platforms). Applying patches needs no library."),
        .trait(
            name: "Deflate",
            description: "The ZIP reader decodes small deflate entries whole and computes CRC-32 with libdeflate (links libdeflate; not on Apple platforms); zlib without it."),
        .trait(
            name: "Libcrypto",
            description: "HotVerify and the ZIP reader's and writer's WinZip AES over libcrypto (OpenSSL 3; not on Apple platforms, which use swift-crypto). SwiftCrypto wins when both are on; with neither, off Apple platforms, CryptoVerifier and CryptoSigner throw `unsupported` and AES entries `unsupportedEncryption`."),
        .trait(
            name: "SwiftCrypto",
            description: "HotVerify and WinZip AES over swift-crypto (the code Apple platforms run) instead of libcrypto off Apple platforms."),
        .trait(
            name: "FaultPoints",
            description: "Named fault points for the kill tests: the process aborts where HOT_ABORT_AT says. Off by default; scripts/test and scripts/kill-harness turn it on. A build without it holds no fault point and never reads HOT_ABORT_AT."),
        .trait(
            name: "defaults",
            description: "The default traits under a name that can stand beside others: `--traits defaults,SwiftCrypto`.",
            enabledTraits: defaultTraits),
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
            name: "CHotZlib", pkgConfig: "zlib",
            providers: [.apt(["zlib1g-dev"]), .brew(["zlib"])]),
        .systemLibrary(
            name: "CHotArchive", pkgConfig: "libarchive",
            providers: [.apt(["libarchive-dev"]), .brew(["libarchive"])]),
        .systemLibrary(
            name: "CHotCrypto", pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"]), .brew(["openssl@3"])]),
        .systemLibrary(
            name: "CHotCurl", pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"]), .brew(["curl"])]),
        .systemLibrary(
            name: "CHotZstd", pkgConfig: "libzstd",
            providers: [.apt(["libzstd-dev"]), .brew(["zstd"])]),
        .systemLibrary(
            name: "CHotDeflate", pkgConfig: "libdeflate",
            providers: [.apt(["libdeflate-dev"]), .brew(["libdeflate"])]),

        // Abstractions and the engine.
        .target(
            name: "HotCore",
            dependencies: ["CHotXattr", .product(name: "Logging", package: "swift-log")]),

        // What servers speak: the signed native manifest and its trust state, and the sources for
        // older servers' formats.
        .target(
            name: "HotManifest",
            dependencies: ["HotCore", .product(name: "Logging", package: "swift-log")]),

        // Implementations: each points into HotCore (and HotVerify into HotManifest, whose
        // `Signer` it implements), never at another.
        .target(
            name: "HotTransport",
            dependencies: [
                "HotCore",
                .target(name: "CHotCurl", condition: .when(platforms: nonApple + [.macOS], traits: ["Curl"])),
            ]),
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
            ] + swiftCrypto),
        .target(
            name: "HotVerify",
            dependencies: [
                "HotCore", "HotManifest",
                .target(name: "CHotCrypto", condition: .when(platforms: nonApple, traits: ["Libcrypto"])),
            ] + swiftCrypto),
        .target(name: "HotStore", dependencies: ["HotCore"]),
        .target(
            name: "HotAssets", dependencies: ["HotCore", .product(name: "Logging", package: "swift-log")]),
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
            ]),

        // The publisher's and operator's tool.
        .executableTarget(
            name: "hot",
            dependencies: [
                "HotUpdate", "HotCore", "HotManifest", "HotTransport", "HotArchive", "HotVerify", "HotStore", "HotAssets",
                argumentParser,
                // `hot publish` signs its S3 requests with libcurl's SigV4 (with the Curl trait).
                .target(name: "CHotCurl", condition: .when(platforms: nonApple + [.macOS], traits: ["Curl"])),
            ]),

        // Examples.
        .executableTarget(
            name: "MinimalPatch",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/MinimalPatch",
            exclude: ["Patches", "README.md"],
            resources: [.copy("Bundle")]),
        .executableTarget(
            name: "ScriptPatches",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/ScriptPatches",
            exclude: ["Patches", "DebugPatch", "README.md", "make-patch-list"]),
        .executableTarget(
            name: "ResourcePacks",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/ResourcePacks",
            exclude: ["README.md", "make-repository"],
            resources: [.copy("Bundle")]),
        .executableTarget(
            name: "WebOfflinePackages",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/WebOfflinePackages",
            exclude: ["README.md", "make-repository", "Modules"]),
        .executableTarget(
            name: "LaunchGuard",
            dependencies: [
                "HotUpdate", argumentParser, .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/LaunchGuard",
            exclude: ["README.md"]),

        // Tests.
        .testTarget(
            name: "HotCoreTests",
            dependencies: ["HotCore", "HotTesting", .product(name: "Logging", package: "swift-log")]),
        .testTarget(name: "HotManifestTests", dependencies: ["HotManifest", "HotCore", "HotTesting"]),
        .testTarget(name: "HotArchiveTests", dependencies: ["HotArchive", "HotCore", "HotTesting", "HotTestServers"]),
        .testTarget(
            name: "HotTransportTests",
            dependencies: ["HotTransport", "HotCore", "HotTesting", "HotTestServers", "HotVerify"]),
        .testTarget(name: "HotVerifyTests", dependencies: ["HotVerify", "HotCore", "HotTesting", "HotTestServers"]),
        .testTarget(name: "HotStoreTests", dependencies: ["HotStore", "HotCore", "HotTesting", "HotTestServers"]),
        .testTarget(
            name: "HotAssetsTests",
            dependencies: [
                "HotAssets", "HotCore", "HotTesting", "HotTestServers", .product(name: "Logging", package: "swift-log"),
            ]),
        // An adopter's view: its own adapters against the public conformance suites.
        .testTarget(name: "AdapterConformanceTests", dependencies: ["HotCore", "HotTesting"]),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "HotUpdate", "HotCore", "HotManifest", "HotTransport", "HotArchive", "HotVerify", "HotStore", "HotAssets", "HotTesting",
                "HotTestServers",
                .product(name: "Logging", package: "swift-log"),
            ]),
    ]
)

// Shared settings, applied once to every target that compiles Swift.
let sharedSwiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
]
for target in package.targets where target.type != .system {
    target.swiftSettings = (target.swiftSettings ?? []) + sharedSwiftSettings
}
