import Foundation
import Logging

/// The manifest the last sync left nothing to do for (`settled.json` under the root): its
/// revision (``Manifest/revision``) and version, the generation that sync left, and the stamp
/// of the store file then (``MetadataStore/commitStamp()``). While no commit came after it,
/// the store holds exactly what that manifest asks for.
///
/// The file is one line of JSON (the fields below but the packages), then one line per
/// package, tab-separated: its id, what a sync that finds nothing new reports of it
/// (`unchanged`, `notRequested` or `blocked`) and its active version (`-` for none). Read at
/// every launch: the packages are lines of bytes, not JSON, so ten thousand of them parse in
/// about a millisecond.
struct SettledSync: Sendable, Equatable {
    /// The fields of the first line.
    struct Header: Codable, Sendable, Hashable {
        /// The manifest's revision, as its source identified it.
        var revision: String
        /// The manifest's version, for the report of a check that finds it unchanged.
        var manifestVersion: Int?
        /// The generation the sync left.
        var generation: Int
        /// The store file's stamp then; another stamp means a commit came after.
        var stamp: String
        /// The catalog's stamp then (`catalog.json`, `FileSystem.identity(of:)`): a catalog
        /// changed or removed since is written again by a plain sync.
        var catalogStamp: String?
        /// The stamps of `packages/` and `filelists/` then: a package's directory or its file
        /// lists removed or added behind the store's back change them.
        var folderStamps: [String]
    }

    var header: Header
    /// Each package as the sync left it, as a check that finds the manifest unchanged reports
    /// it: its id, change and active version.
    var packages: [SyncReport.PackageOutcome]

    /// The changes a line may name, with their spelling.
    private static let changes: [(bytes: [UInt8], change: UpdatePlan.Change)] = [
        UpdatePlan.Change.unchanged, .notRequested, .blocked,
    ].map { (Array($0.description.utf8), $0) }

    /// The file's bytes.
    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        var data = try encoder.encode(header)
        data.append(0x0A)
        data.append(
            Data(packages.map { "\($0.id)\t\($0.change)\t\($0.activeVersion ?? "-")\n" }.joined().utf8)
        )
        return data
    }

    /// The record in `data`; nil for anything this code does not write (an older form
    /// included: the next sync then runs in full and writes it again).
    static func decode(_ data: Data) -> SettledSync? {
        guard let newline = data.firstIndex(of: 0x0A),
            let header = try? JSONDecoder().decode(Header.self, from: data[data.startIndex..<newline])
        else { return nil }
        var packages: [SyncReport.PackageOutcome] = []
        // About one package per 16 bytes: `p1\tunchanged\t1\n` is 15.
        packages.reserveCapacity((data.count - newline) / 16)
        let ok = data[data.index(after: newline)...].withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Bool in
            // Three columns a line; the change and an absent version are compared as bytes, so
            // a line makes two small strings.
            var start = 0
            var column = 0
            var id = ""
            var change = UpdatePlan.Change.unchanged
            for index in 0..<bytes.count {
                let byte = bytes[index]
                guard byte == 0x09 || byte == 0x0A else { continue }
                let field = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                start = index + 1
                switch (column, byte) {
                case (0, 0x09):
                    id = String(decoding: field, as: UTF8.self)
                case (1, 0x09):
                    guard let known = Self.changes.first(where: { $0.bytes.elementsEqual(field) }) else { return false }
                    change = known.change
                case (2, 0x0A):
                    let absent = field.count == 1 && field[0] == UInt8(ascii: "-")
                    packages.append(
                        SyncReport.PackageOutcome(
                            id: id,
                            change: change,
                            activeVersion: absent ? nil : String(decoding: field, as: UTF8.self)
                        )
                    )
                    column = -1
                default:
                    return false
                }
                column += 1
            }
            return start == bytes.count && column == 0
        }
        guard ok else { return nil }
        return SettledSync(header: header, packages: packages)
    }
}

extension StoreStateFile {
    /// The manifest the last sync left nothing to do for (`settled.json`, ``SettledSync``).
    static let settled = StoreStateFile(name: StoreLayout.settledFileName, faultPoint: "mid-settled")
}

extension Store {
    /// The manifest the last sync of this root left nothing to do for, when nothing has
    /// happened since that a sync would act on: no commit (the store file's stamp is the one
    /// recorded), no change to the catalog, to `packages/` or to `filelists/` (a package's
    /// directory removed behind the store's back), no reader reporting lost files (`losses/`),
    /// no quick check due, no objects or hook output gone, no interrupted step in `staging/`.
    /// Then a sync whose manifest has the same revision has nothing to plan, download, check or
    /// write. A fixed number of `stat`s and one small read, however many packages the store
    /// holds: what is lost inside a package's directory behind the store's back is found by
    /// the reader that misses it (its loss marker), by the quick check, due once per
    /// `quickCheckInterval`, or by a repair. Nil otherwise, or when the metadata store gives
    /// no stamp.
    func settledSync(quickCheckInterval: TimeInterval?) -> SettledSync? {
        let root = layout.root
        guard let data = try? StoreStateFile.settled.read(root: root),
            let settled = SettledSync.decode(data),
            let stamp = metadata.commitStamp(), stamp == settled.header.stamp,
            FileSystem.identity(of: StoreStateFile.catalog.url(root: root)) == settled.header.catalogStamp,
            folderStamps() == settled.header.folderStamps
        else { return nil }
        let markers = FileSystem.contents(of: layout.lossesDirectory).filter { !$0.hasPrefix(".") }
        guard markers.isEmpty, !objectsDirectoryIsGone,
            !hooks.contains(where: { $0.isMissing(generation: settled.header.generation, root: root) }),
            quickCheckInterval.map({ !LossMarker.quickCheckDue(interval: $0, layout: layout) }) ?? true,
            nothingToSweep()
        else { return nil }
        return settled
    }

    /// The stamps of `packages/` and `filelists/` (`FileSystem.identity(of:)`, `-` for one
    /// that is not there): adding or removing a package's directory or file lists changes them.
    private func folderStamps() -> [String] {
        [layout.packagesDirectory, layout.fileListsDirectory].map { FileSystem.identity(of: $0) ?? "-" }
    }

    /// Records that the manifest of `revision` left nothing to do, with each package as
    /// `outcomes` left it (the report of the sync that applied it), for the generation this
    /// store last committed or read, unless a commit of another process came after that (the
    /// store file's stamp is taken under the exclusive lock and must be the one this store
    /// last saw). Written only when it changes. A failure is logged: the next sync reads the
    /// manifest in full.
    func recordSettled(revision: String, manifestVersion: Int?, outcomes: [SyncReport.PackageOutcome]) async {
        // A record a sync would act on (damage to heal, a failure) is not settled.
        guard let snapshot = cached, let seen = lastStamp,
            !snapshot.packages.values.contains(where: { $0.state.isDamage || $0.state == .failed })
        else { return }
        var packages: [SyncReport.PackageOutcome] = []
        for outcome in outcomes where outcome.change != .remove {
            // What the next sync would report: a package this one changed is unchanged then.
            let change = outcome.change == .notRequested || outcome.change == .blocked ? outcome.change : .unchanged
            packages.append(
                SyncReport.PackageOutcome(id: outcome.id, change: change, activeVersion: outcome.activeVersion)
            )
        }
        let settled = SettledSync(
            header: SettledSync.Header(
                revision: revision,
                manifestVersion: manifestVersion,
                generation: snapshot.generation,
                stamp: seen,
                catalogStamp: FileSystem.identity(of: StoreStateFile.catalog.url(root: layout.root)),
                folderStamps: folderStamps()
            ),
            packages: packages
        )
        let root = layout.root
        let metadata = self.metadata
        do {
            let bytes = try settled.encoded()
            let wait = lockWait
            try await FileSystem.offload {
                try StoreStateFile.settled.update(root: root, wait: wait) { data in
                    guard metadata.commitStamp() == seen else { return }
                    data = bytes
                }
            }
        } catch {
            logger.warning("cannot record that the store settled on the manifest: \(error)")
        }
    }
}
