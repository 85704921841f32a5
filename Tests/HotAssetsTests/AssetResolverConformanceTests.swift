import Foundation
import HotAssets
import HotCore
import HotTesting
import Testing

/// The directory resolver, alone and in chains, passes the public AssetResolver conformance suite.
@Suite struct AssetResolverConformanceTests {
    static let origin = ResolvedAsset.Origin.package(id: "images", version: "3")

    static let directory = AssetResolverConformance(origin: origin) { root in
        try DirectoryAssetResolver(directory: root, origin: origin)
    }

    /// Built from a file list, as the store's installed packages are.
    static let fromFileList = AssetResolverConformance(origin: .bundle) { root in
        let files = (FileManager.default.enumerator(atPath: root.path)?.allObjects as? [String] ?? [])
            .filter { path in
                let type = (try? FileManager.default.attributesOfItem(atPath: root.appendingPathComponent(path).path))?[
                    .type
                ]
                return type as? FileAttributeType == .typeRegular
            }
        return DirectoryAssetResolver(directory: root, origin: .bundle, files: files)
    }

    /// A chain whose first resolver is over an empty package: every answer comes from the second.
    static let chained = AssetResolverConformance(origin: origin) { root in
        let empty = root.deletingLastPathComponent().appendingPathComponent("empty-package")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)
        return AssetResolverChain([
            try DirectoryAssetResolver(directory: empty, origin: .package(id: "other", version: "1")),
            try DirectoryAssetResolver(directory: root, origin: origin),
        ])
    }

    @Test(arguments: directory.checks)
    func directoryResolverConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }

    @Test(arguments: fromFileList.checks)
    func fileListResolverConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }

    @Test(arguments: chained.checks)
    func chainedResolverConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }
}
