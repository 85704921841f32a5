import Foundation
import HotCore
import HotStore
import HotTesting
import Testing

/// The file store, in every format, passes the public MetadataStore conformance suite.
@Suite struct MetadataStoreConformanceTests {
    static let json = MetadataStoreConformance { directory in
        let store = FileMetadataStore(root: directory)
        return MetadataStoreConformance.Subject(
            store: store,
            reopen: { FileMetadataStore(root: directory) },
            corrupt: { try Data("{ \"schema\": 1, \"packages\": [".utf8).write(to: store.fileURL) }
        )
    }

    static let binaryPropertyList = MetadataStoreConformance { directory in
        let store = FileMetadataStore(root: directory, format: .propertyList)
        return MetadataStoreConformance.Subject(
            store: store,
            reopen: { FileMetadataStore(root: directory, format: .propertyList) },
            corrupt: { try Data("bplist00 then nothing a decoder reads".utf8).write(to: store.fileURL) }
        )
    }

    static let xmlPropertyList = MetadataStoreConformance { directory in
        let store = FileMetadataStore(root: directory, format: .xmlPropertyList)
        return MetadataStoreConformance.Subject(
            store: store,
            reopen: { FileMetadataStore(root: directory, format: .xmlPropertyList) },
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
