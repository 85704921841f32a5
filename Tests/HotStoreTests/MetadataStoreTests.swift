import Foundation
import HotCore
import HotStore
import Testing

@Suite("FileMetadataStore, in JSON and in property lists")
struct MetadataStoreTests {
    @Test("A rich snapshot round-trips through a fresh store value", arguments: StoreKind.allCases)
    func roundTrip(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let snapshot = richSnapshot()
            try await kind.make(root: root).commit(snapshot)
            #expect(FileManager.default.fileExists(atPath: root.appendingPathComponent(kind.defaultFileName).path))
            let loaded = try await kind.make(root: root).load()
            #expect(loaded == snapshot)
            #expect(loaded.packages["h5-home"]?.lastError?.hasPrefix("下载失败") == true)

            // A second commit replaces the first entirely.
            var next = StoreSnapshot(generation: 8, packages: [:])
            next.packages["only"] = PackageRecord(id: "only", state: .installed, active: nil)
            try await kind.make(root: root).commit(next)
            #expect(try await kind.make(root: root).load() == next)
            #expect(try listing(root) == [kind.defaultFileName])
        }
    }

    @Test("A custom file name is used", arguments: StoreKind.allCases)
    func customFileName(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let store = kind.make(root: root, fileName: "meta-data.bin")
            try await store.commit(richSnapshot())
            #expect(try listing(root) == ["meta-data.bin"])
            #expect(try await kind.make(root: root, fileName: "meta-data.bin").load() == richSnapshot())
            #expect(try await kind.make(root: root).load() == .empty)
            for bad in ["", "..", "sub/store.json"] {
                await #expect(throws: HotUpdateError(.invalidArgument, "")) {
                    try await kind.make(root: root, fileName: bad).commit(.empty)
                }
            }
        }
    }

    @Test("Each format keeps its file name, JSON by default; a property-list store reads either encoding")
    func formats() async throws {
        try await withTemporaryDirectory { root in
            #expect(FileMetadataStore(root: root).format == .json)
            for kind in StoreKind.allCases {
                let store = FileMetadataStore(root: root, format: kind.format)
                #expect(store.fileURL == root.appendingPathComponent(kind.defaultFileName), "\(kind)")
                #expect(kind.format.defaultFileName == kind.defaultFileName)
            }
            let snapshot = richSnapshot()
            try await FileMetadataStore(root: root, format: .xmlPropertyList).commit(snapshot)
            #expect(try await FileMetadataStore(root: root, format: .propertyList).load() == snapshot)
            try await FileMetadataStore(root: root, format: .propertyList).commit(snapshot)
            #expect(try await FileMetadataStore(root: root, format: .xmlPropertyList).load() == snapshot)
        }
    }

    @Test("A missing file or a missing root loads as empty", arguments: StoreKind.allCases)
    func missing(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            #expect(try await kind.make(root: root).load() == .empty)
            let absent = root.appendingPathComponent("not-yet/created")
            #expect(try await kind.make(root: absent).load() == .empty)
            #expect(!FileManager.default.fileExists(atPath: absent.path))
            // The first commit creates the root.
            try await kind.make(root: absent).commit(richSnapshot())
            #expect(try await kind.make(root: absent).load() == richSnapshot())
        }
    }

    @Test("A corrupt file throws .storeCorrupt naming the file", arguments: StoreKind.allCases)
    func corrupt(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let file = root.appendingPathComponent(kind.defaultFileName)
            let samples: [Data] = [
                Data(),
                Data("garbage \u{0}\u{1}".utf8),
                Data("{\"schema\": 1, \"generation\": \"seven\"}".utf8),
                Data("[1, 2, 3]".utf8),
            ]
            for sample in samples {
                try sample.write(to: file)
                let error = try await #require(throws: HotUpdateError.self) { try await kind.make(root: root).load() }
                #expect(error.code == .storeCorrupt)
                #expect(error.description.contains(file.path), "\(error)")
            }
            // A valid file cut short.
            try await kind.make(root: root).commit(richSnapshot())
            let whole = try Data(contentsOf: file)
            try whole.prefix(whole.count / 2).write(to: file)
            await #expect(throws: HotUpdateError(.storeCorrupt, "")) { try await kind.make(root: root).load() }
            // The store file is a directory.
            try FileManager.default.removeItem(at: file)
            try FileManager.default.createDirectory(at: file, withIntermediateDirectories: false)
            await #expect(throws: HotUpdateError(.storeCorrupt, "")) { try await kind.make(root: root).load() }
        }
    }

    @Test(
        "A snapshot breaking the store's rules is corrupt on load and refused on commit",
        arguments: StoreKind.allCases
    )
    func rules(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let file = root.appendingPathComponent(kind.defaultFileName)
            try await kind.make(root: root).commit(richSnapshot())
            let before = try Data(contentsOf: file)

            var absolute = richSnapshot()
            absolute.packages["images"]?.previous[0].path = root.appendingPathComponent("packages/images/2").path
            var escaping = richSnapshot()
            escaping.packages["images"]?.active?.path = "packages/../../etc"
            var misfiled = richSnapshot()
            misfiled.packages["other"] = misfiled.packages["images"]
            var badID = richSnapshot()
            badID.packages["bad id"] = PackageRecord(id: "bad id", state: .installed, active: nil)
            var oldSchema = richSnapshot()
            oldSchema.schema = 0
            for snapshot in [absolute, escaping, misfiled, badID, oldSchema] {
                await #expect(throws: HotUpdateError(.invalidArgument, "")) {
                    try await kind.make(root: root).commit(snapshot)
                }
            }
            #expect(try Data(contentsOf: file) == before)

            // The same breaches written by another tool are corrupt on load.
            let script = """
                import json, plistlib, sys
                path, fmt, breach, root = sys.argv[1:5]
                raw = open(path, "rb").read()
                doc = json.loads(raw) if fmt == "json" else plistlib.loads(raw)
                images = doc["packages"]["images"]
                if breach == "absolute":
                    images["previous"][0]["path"] = root + "/packages/images/2"
                elif breach == "escaping":
                    images["active"]["path"] = "packages/../../etc"
                else:
                    doc["packages"]["other"] = images
                if fmt == "json":
                    out = json.dumps(doc).encode()
                else:
                    out = plistlib.dumps(doc, fmt=plistlib.FMT_BINARY if fmt == "binary" else plistlib.FMT_XML)
                open(path, "wb").write(out)
                """
            let format = kind == .json ? "json" : kind == .binaryPropertyList ? "binary" : "xml"
            for breach in ["absolute", "escaping", "misfiled"] {
                try before.write(to: file)
                try await run(["python3", "-c", script, file.path, format, breach, root.path])
                let error = try await #require(throws: HotUpdateError.self) { try await kind.make(root: root).load() }
                #expect(error.code == .storeCorrupt, "\(breach)")
                #expect(error.message.contains("inconsistent"), "\(breach): \(error)")
            }
        }
    }

    @Test("A file with a newer schema throws .storeCorrupt saying so", arguments: StoreKind.allCases)
    func newerSchema(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let file = root.appendingPathComponent(kind.defaultFileName)
            let newer = StoreSnapshot.currentSchema + 1
            // Written by python3, in a shape this version could not decode anyway.
            let script = """
                import json, plistlib, sys
                doc = {"schema": \(newer), "generation": 3, "packages": [{"id": "images"}], "extra": "x"}
                if sys.argv[2] == "json":
                    open(sys.argv[1], "w").write(json.dumps(doc))
                else:
                    fmt = plistlib.FMT_BINARY if sys.argv[2] == "binary" else plistlib.FMT_XML
                    open(sys.argv[1], "wb").write(plistlib.dumps(doc, fmt=fmt))
                """
            let format = kind == .json ? "json" : kind == .binaryPropertyList ? "binary" : "xml"
            try await run(["python3", "-c", script, file.path, format])
            let error = try await #require(throws: HotUpdateError.self) { try await kind.make(root: root).load() }
            #expect(error.code == .storeCorrupt)
            #expect(error.message.contains("newer"), "\(error)")
            #expect(error.message.contains("schema \(newer)"), "\(error)")
            #expect(error.subject == file.path)
        }
    }

    @Test("A file python3 writes in the current schema loads", arguments: StoreKind.allCases)
    func foreignWriter(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let file = root.appendingPathComponent(kind.defaultFileName)
            let script = """
                import json, plistlib, sys, datetime
                when = datetime.datetime(2024, 3, 1, 12, 0, 0)
                version = {"version": "5", "path": "packages/images/5", "archiveSize": 10,
                           "sourceURL": "https://cdn.example.com/i.zip"}
                if sys.argv[2] == "json":
                    version["installedAt"] = "2024-03-01T12:00:00Z"
                else:
                    version["installedAt"] = when
                # highestManifestVersion: a key older stores wrote and this one no longer keeps.
                doc = {"schema": 1, "generation": 2, "highestManifestVersion": 9, "packages": {
                    "images": {"id": "images", "state": "installed", "active": version, "previous": []}}}
                if sys.argv[2] == "json":
                    open(sys.argv[1], "w").write(json.dumps(doc))
                else:
                    fmt = plistlib.FMT_BINARY if sys.argv[2] == "binary" else plistlib.FMT_XML
                    open(sys.argv[1], "wb").write(plistlib.dumps(doc, fmt=fmt))
                """
            let format = kind == .json ? "json" : kind == .binaryPropertyList ? "binary" : "xml"
            try await run(["python3", "-c", script, file.path, format])
            let snapshot = try await kind.make(root: root).load()
            #expect(snapshot.generation == 2)
            let active = try #require(snapshot.packages["images"]?.active)
            #expect(active.path == "packages/images/5")
            #expect(active.installedAt == Date(timeIntervalSince1970: 1_709_294_400))
        }
    }

    @Test("The JSON file is pretty-printed, sorted, with ISO 8601 dates to the millisecond")
    func jsonLayout() async throws {
        try await withTemporaryDirectory { root in
            let store = FileMetadataStore(root: root)
            var snapshot = richSnapshot()
            snapshot.packages["images"]?.active?.installedAt = Date(timeIntervalSince1970: 1_700_000_300.25)
            try await store.commit(snapshot)
            let text = try String(contentsOf: store.fileURL, encoding: .utf8)
            #expect(text.contains("\"installedAt\" : \"2023-11-14T22:18:20.250Z\""), "\(text)")
            #expect(text.contains("https://cdn.example.com/images-3.zip"))  // slashes unescaped
            #expect(text.contains("\n  \"generation\" : 7"))
            let generation = try #require(text.range(of: "\"generation\""))
            let packages = try #require(text.range(of: "\"packages\""))
            let schema = try #require(text.range(of: "\"schema\""))
            #expect(generation.lowerBound < packages.lowerBound && packages.lowerBound < schema.lowerBound)
            #expect(try await store.load() == snapshot)
            // python3 agrees it is JSON.
            let checked = try await run([
                "python3", "-c", "import json,sys; print(json.load(open(sys.argv[1]))['generation'])",
                store.fileURL.path,
            ])
            #expect(checked == "7\n")
        }
    }

    @Test("The binary property list keeps dates exactly and python3's plistlib reads it")
    func plistLayout() async throws {
        try await withTemporaryDirectory { root in
            let store = FileMetadataStore(root: root, format: .propertyList)
            var snapshot = richSnapshot()
            snapshot.packages["images"]?.active?.installedAt = Date(timeIntervalSinceReferenceDate: 123_456_789.123_456)
            try await store.commit(snapshot)
            #expect(try await store.load() == snapshot)
            let bytes = try Data(contentsOf: store.fileURL)
            #expect(bytes.starts(with: Data("bplist00".utf8)))
            let checked = try await run([
                "python3", "-c",
                "import plistlib,sys; d=plistlib.load(open(sys.argv[1],'rb')); print(d['generation'], sorted(d['packages']))",
                store.fileURL.path,
            ])
            #expect(checked == "7 ['fonts', 'future', 'h5-home', 'images']\n")
        }
    }

    @Test("The stored bytes hold no absolute path of the store root", arguments: StoreKind.allCases)
    func noAbsolutePaths(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let store = kind.make(root: root)
            try await store.commit(richSnapshot())
            let bytes = try Data(contentsOf: root.appendingPathComponent(kind.defaultFileName))
            #expect(bytes.count > 200)
            #expect(bytes.range(of: Data(root.path.utf8)) == nil)
            #expect(bytes.range(of: Data(root.lastPathComponent.utf8)) == nil)
            #expect(bytes.range(of: Data("packages/images/3".utf8)) != nil)
        }
    }

    @Test("Fifty concurrent commits leave one of them, whole", arguments: StoreKind.allCases)
    func concurrentCommits(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let snapshots = (0..<50).map { index -> StoreSnapshot in
                var snapshot = richSnapshot(generation: index)
                snapshot.packages["images"]?.lastError = String(repeating: "x", count: index * 97)
                return snapshot
            }
            try await withThrowingTaskGroup(of: Void.self) { group in
                for snapshot in snapshots {
                    // A new store value per task: they still share the file's serial queue.
                    group.addTask { try await kind.make(root: root).commit(snapshot) }
                    group.addTask { _ = try await kind.make(root: root).load() }
                }
                try await group.waitForAll()
            }
            let loaded = try await kind.make(root: root).load()
            #expect(snapshots.contains(loaded))
            #expect(try listing(root) == [kind.defaultFileName])
        }
    }

    @Test("Leftover temporary files of a crashed commit are swept by the next commit", arguments: StoreKind.allCases)
    func leftoverTemporaries(kind: StoreKind) async throws {
        try await withTemporaryDirectory { root in
            let leftover = root.appendingPathComponent(".\(kind.defaultFileName).tmp-0000")
            let unrelated = root.appendingPathComponent(".other.tmp-0000")
            try Data("half".utf8).write(to: leftover)
            try Data("keep".utf8).write(to: unrelated)
            try await kind.make(root: root).commit(richSnapshot())
            #expect(try listing(root) == [".other.tmp-0000", kind.defaultFileName])
        }
    }
}
