import Foundation
import HotCore
import HotStore
import HotTesting
import Testing

/// Both stores, in every encoding, pass the public MetadataStore conformance suite.
@Suite struct MetadataStoreConformanceTests {
    static let json = MetadataStoreConformance { directory in
        let store = JSONMetadataStore(root: directory)
        return MetadataStoreConformance.Subject(
            store: store,
            reopen: { JSONMetadataStore(root: directory) },
            corrupt: { try Data("{ \"schema\": 1, \"packages\": [".utf8).write(to: store.fileURL) }
        )
    }

    static let binaryPropertyList = MetadataStoreConformance { directory in
        let store = PropertyListMetadataStore(root: directory)
        return MetadataStoreConformance.Subject(
            store: store,
            reopen: { PropertyListMetadataStore(root: directory) },
            corrupt: { try Data("bplist00 then nothing a decoder reads".utf8).write(to: store.fileURL) }
        )
    }

    static let xmlPropertyList = MetadataStoreConformance { directory in
        let store = PropertyListMetadataStore(root: directory, encoding: .xml)
        return MetadataStoreConformance.Subject(
            store: store,
            reopen: { PropertyListMetadataStore(root: directory, encoding: .xml) },
            corrupt: { try Data("<?xml version=\"1.0\"?><plist><dict><key>schema".utf8).write(to: store.fileURL) }
        )
    }

    @Test(arguments: json.checks)
    func jsonConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }

    @Test(arguments: binaryPropertyList.checks)
    func binaryPropertyListConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }

    @Test(arguments: xmlPropertyList.checks)
    func xmlPropertyListConforms(_ check: ConformanceCheck) async throws {
        try await check.run()
    }
}
