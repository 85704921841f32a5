import Foundation
import Logging

/// The health part of an ``Updater``: whether packages and files can be used, checks of
/// installed files against what was recorded, and repairs. Reach it as ``Updater/health``.
///
/// ```swift
/// if await updater.health.isAvailable("filters") { showFilterPicker() }
/// let report = try await updater.health.repair(packageID: "filters")
/// ```
public struct UpdaterHealth: Sendable {
    let updater: Updater
    var store: Store { updater.store }

    /// Whether a package can be used now: it has an active version, is not disabled or
    /// known to be damaged, and its tree is there.
    ///
    /// The launch check costs O(packages), not O(files): a version the store records as
    /// ``PackageState/installed`` was verified file by file when it was installed or
    /// repaired, and every check since that found damage recorded it, so the stored state is
    /// its health marker and only the tree's directory is looked at. A version kept active
    /// under another state (a failed update of a newer one, say) gets a quick check
    /// (presence and sizes) on its first call. Single files are checked when they are used
    /// (``isAvailable(resource:in:)``); the full check is one call away:
    /// ``verify(packageID:depth:recording:)`` or ``verifyAll(depth:recording:)``.
    ///
    /// - Parameter packageID: The package.
    /// - Returns: false for an unknown, disabled or damaged package, or one whose store
    ///   cannot be read.
    ///
    /// ```swift
    /// if await updater.health.isAvailable("filters") { showFilterPicker() }
    /// ```
    public func isAvailable(_ packageID: String) async -> Bool {
        guard let snapshot = try? await store.read(), let record = snapshot.packages[packageID],
            let active = record.active, record.state.servesAssets
        else { return false }
        if await store.isChecked(active.path) { return true }
        if record.state == .installed { return store.treeExists(active) }
        return (try? await verify(packageID: packageID, depth: .quick).isHealthy) ?? false
    }

    /// Whether one file of a package can be used now: the package is available (see
    /// ``isAvailable(_:)``), the file belongs to its active version, and it is present with
    /// its installed size.
    ///
    /// - Parameters:
    ///   - resource: The file's path inside the package, `/`-separated (`filters/sepia.png`).
    ///   - packageID: The package.
    ///
    /// ```swift
    /// await updater.health.isAvailable(resource: "fonts/Brand.ttf", in: "fonts")
    /// ```
    public func isAvailable(resource: String, in packageID: String) async -> Bool {
        guard await isAvailable(packageID), let active = await store.cachedRecord(packageID)?.active,
            let list = try? await store.fileList(forVersionPath: active.path),
            let file = list.files.first(where: { $0.path == resource }),
            let root = try? store.directory(of: active),
            ContainedDirectory.regularFiles([resource], under: root.path) == [resource],
            let info = FileInfo(root.appendingPathComponent(resource, isDirectory: false))
        else { return false }
        return info.isRegular && info.size == file.size
    }

    /// Checks the active version's files against what was recorded when it was installed,
    /// and records the result: ``PackageState/fileMissing`` or ``PackageState/digestMismatch``
    /// when something is wrong, ``PackageState/installed`` again when a damaged package is
    /// whole.
    ///
    /// - Parameters:
    ///   - packageID: The package.
    ///   - depth: ``PackageHealth/Depth/quick`` (presence and sizes) or ``PackageHealth/Depth/full``
    ///     (hashes). A version marked ``InstalledVersion/damageSeen`` is always checked by hash.
    ///   - recording: Whether to record the state found. With `false` the check is read-only:
    ///     it takes only the store's shared lock and changes nothing (what `hot status --check` does).
    /// - Returns: What was found.
    /// - Throws: ``HotUpdateError/Code/notFound`` when the package has no active version;
    ///   ``HotUpdateError/Code/storeCorrupt`` when its file list cannot be read.
    ///
    /// ```swift
    /// let health = try await updater.health.verify(packageID: "filters", depth: .full)
    /// if !health.isHealthy { _ = try await updater.health.repair(packageID: "filters") }
    /// ```
    public func verify(
        packageID: String,
        depth: PackageHealth.Depth = .full,
        recording: Bool = true
    ) async throws
        -> PackageHealth
    {
        let check = try await store.check(packageID, depth: depth, recording: recording)
        if let change = check.change { updater.hub.publish(change.id, change.version, change.state, change.error) }
        return check.health
    }

    /// Checks every package with an active version, as ``verify(packageID:depth:recording:)`` does.
    ///
    /// - Parameters:
    ///   - depth: How deep to check.
    ///   - recording: Whether to record the states found (see ``verify(packageID:depth:recording:)``).
    /// - Returns: One result per package, by id.
    /// - Throws: ``HotUpdateError`` when the store cannot be read.
    public func verifyAll(depth: PackageHealth.Depth = .quick, recording: Bool = true) async throws -> [PackageHealth] {
        var results: [PackageHealth] = []
        for id in try await store.read().packages.values.filter({ $0.active != nil }).map(\.id).sorted() {
            do {
                results.append(try await verify(packageID: id, depth: depth, recording: recording))
            } catch let error as HotUpdateError where error.code == .notFound && error.packageID == id {
                continue  // deleted since the snapshot was read
            }
        }
        return results
    }

    /// Makes the active version of a package whole again: every missing or damaged file is
    /// put back from `objects/` when its object is intact (no network needed); when an
    /// object is gone or damaged too, the version is downloaded again from where it came
    /// from and its tree replaced. The states on the way are recorded and published.
    ///
    /// One object holds each content and is hard-linked into every tree that has it, so a
    /// damaged object damages every version that links it, kept previous versions (of this
    /// package or another) included. Once the download has put back a good object, every
    /// kept tree that names that content is linked to it again
    /// (``PackageHealth/RepairReport/relinked``); until then, those versions are marked
    /// ``InstalledVersion/damageSeen`` and a restore of one hashes its files first.
    ///
    /// - Parameters:
    ///   - packageID: The package.
    ///   - depth: How deep the check before the repair goes.
    /// - Returns: What was found and done; ``PackageHealth/RepairReport/error`` says why a
    ///   re-fetch (or the relinking of other versions) failed.
    /// - Throws: ``HotUpdateError/Code/notFound`` when the package has no active version;
    ///   ``HotUpdateError`` when the store cannot be read or written.
    ///
    /// ```swift
    /// let report = try await updater.health.repair(packageID: "filters")
    /// print(report.restored, report.refetched, report.relinked.count)
    /// ```
    public func repair(packageID: String, depth: PackageHealth.Depth = .full) async throws -> PackageHealth.RepairReport
    {
        let local = try await store.repairLocally(packageID, depth: depth)
        for change in local.changes { updater.hub.publish(change.id, change.version, change.state, change.error) }
        var report = PackageHealth.RepairReport(
            id: packageID,
            before: local.before,
            restored: local.restore.restored,
            refetched: false,
            after: local.after ?? local.before
        )
        guard let repairing = local.refetch else { return report }
        let fetched = await refetch(packageID, repairing, digests: local.restore.remainingDigests, check: false)
        report.refetched = fetched.version != nil
        report.error = fetched.error
        report.relinked = fetched.relinked
        report.after = try await verify(packageID: packageID, depth: depth)
        if let failure = fetched.error, !report.after.isHealthy {
            updater.hub.publish(packageID, report.after.version, report.after.state, failure)
        }
        return report
    }

    /// What ``refetch(_:_:digests:check:)`` did.
    struct Refetch: Sendable {
        /// The version active after the download; nil when it failed.
        var version: String?
        /// The bytes downloaded.
        var bytes: Int64 = 0
        /// The kept files linked to the good objects again.
        var relinked: [PackageHealth.RelinkedFile] = []
        /// Why the download, the relinking or the check after it failed.
        var error: HotUpdateError?
    }

    /// Downloads the installed version `version` of `packageID` again from its recorded source
    /// into its tree, links the kept trees sharing `digests` to the good objects again, and,
    /// with `check`, checks the tree after (presence and sizes).
    func refetch(
        _ packageID: String,
        _ version: InstalledVersion,
        digests: Set<String>,
        check: Bool
    ) async -> Refetch {
        var result = Refetch()
        do {
            let descriptor = try Self.descriptor(fetchingAgain: version, of: packageID)
            let fetched = try await updater.join(descriptor, repairing: version.path)
            result.version = fetched.version.version
            result.bytes = fetched.bytesDownloaded
        } catch {
            result.error = HotUpdateError.wrap(
                error,
                as: .internalInconsistency,
                "cannot re-fetch",
                packageID: packageID
            )
            return result
        }
        do {
            result.relinked = try await store.relinkShared(digests)
        } catch {
            result.error = HotUpdateError.wrap(
                error,
                as: .fileSystem,
                "repaired, but the other versions sharing its files could not be linked to them again",
                packageID: packageID
            )
        }
        guard check else { return result }
        do {
            let after = try await verify(packageID: packageID, depth: .quick)
            if !after.isHealthy {
                result.error =
                    result.error
                    ?? HotUpdateError(
                        .notFound,
                        "the files of version \(version.version) could not be put back",
                        packageID: packageID
                    )
            }
        } catch {
            result.error = HotUpdateError.wrap(
                error,
                as: .fileSystem,
                "cannot check the healed version",
                packageID: packageID
            )
        }
        return result
    }

    /// Repairs every package with an active version, as ``repair(packageID:depth:)`` does.
    ///
    /// - Parameter depth: How deep the checks go.
    /// - Returns: One report per package, by id.
    /// - Throws: ``HotUpdateError`` when the store cannot be read or written.
    public func repairAll(depth: PackageHealth.Depth = .full) async throws -> [PackageHealth.RepairReport] {
        var reports: [PackageHealth.RepairReport] = []
        for id in try await store.read().packages.values.filter({ $0.active != nil }).map(\.id).sorted() {
            reports.append(try await repair(packageID: id, depth: depth))
        }
        return reports
    }

    /// What to download to fetch the installed version `version` again: its recorded source.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when no source is recorded;
    ///   ``HotUpdateError/Code/unsupported`` for a version installed from a local folder.
    static func descriptor(fetchingAgain version: InstalledVersion, of packageID: String) throws -> PackageDescriptor {
        guard let url = URL(string: version.sourceURL) else {
            throw HotUpdateError(.notFound, "no source recorded for version \(version.version)", packageID: packageID)
        }
        guard !LocalFolder.isLocalSource(version.sourceURL) else {
            throw HotUpdateError(
                .unsupported,
                "installed from the local folder \(url.path), which cannot be downloaded again",
                packageID: packageID
            )
        }
        return try PackageDescriptor(
            id: packageID,
            version: version.version,
            url: url,
            size: version.archiveSize,
            sha256: try version.sha256.map { try Digest(algorithm: .sha256, hex: $0) },
            md5: try version.md5.map { try Digest(algorithm: .md5, hex: $0) }
        )
    }
}
