import Foundation
import Logging

extension Updater {
    /// Activates every installed patch (not disabled, with an active version) through
    /// `activator`, one at a time, in the order of the last manifest applied, then any others
    /// by id. Call it at launch, before the network is asked anything.
    ///
    /// A patch whose hook throws is recorded as ``PackageState/failed`` with the error; one
    /// that a hook accepts after an earlier failure is ``PackageState/installed`` again.
    ///
    /// - Parameter activator: The app's hook.
    /// - Returns: One result per patch, in the order activated.
    ///
    /// ```swift
    /// let patches = Updater(configuration: patchesConfiguration)   // a store of its own
    /// for result in await patches.activateInstalledPatches(with: ScriptLoader()) where !result.succeeded {
    ///     log(result.error)
    /// }
    /// ```
    public func activateInstalledPatches(with activator: any PatchActivator) async -> [ScriptPatch.Activation] {
        guard let snapshot = try? await open() else { return [] }
        return await activate(Self.patchOrder(snapshot, among: Set(snapshot.packages.keys)), with: activator)
    }

    /// Syncs with a patch list, then activates the patches the sync added or updated, in the
    /// list's order. Patches that were already installed are not activated again (they were
    /// at launch).
    ///
    /// Keep script patches in a store of their own: a complete patch list removes every
    /// package it does not name.
    ///
    /// - Parameters:
    ///   - source: The patch list.
    ///   - activator: The app's hook.
    /// - Returns: The sync's report and one activation per new or updated patch.
    /// - Throws: ``HotUpdateError`` when the patch list cannot be fetched or read.
    ///
    /// ```swift
    /// let (report, activations) = try await patches.syncPatches(from: patchList, activator: ScriptLoader())
    /// ```
    public func syncPatches(
        from source: any ManifestSource,
        activator: any PatchActivator
    ) async throws
        -> (report: SyncReport, activations: [ScriptPatch.Activation])
    {
        let report = try await sync(from: source)
        let changed = Set(report.packages.filter { $0.change.downloads && $0.succeeded }.map(\.id))
        let snapshot = try await open()
        let activations = await activate(Self.patchOrder(snapshot, among: changed), with: activator)
        return (report, activations)
    }

    /// Installs a patch from a local folder, with no server: a debug patch a developer edits
    /// and reinstalls. Its files are hashed, stored as objects and recorded like any other
    /// version, replacing the active one (which is kept for rollback). A later sync with a
    /// complete patch list that does not name it removes it, as it would any package.
    ///
    /// - Parameters:
    ///   - folder: The patch's files. Symbolic links are refused.
    ///   - id: The package id to install it as.
    ///   - version: The version to record (for example `debug-3`).
    /// - Returns: The installed package.
    /// - Throws: ``HotUpdateError/Code/notFound`` when `folder` is not a directory,
    ///   ``HotUpdateError/Code/unsafeEntry`` for a symbolic link or special file in it,
    ///   ``HotUpdateError/Code/fileSystem`` when it cannot be copied or recorded.
    ///
    /// ```swift
    /// let patch = try await patches.installLocal(from: debugFolder, id: "debug", version: "local-1")
    /// _ = await patches.activateInstalledPatches(with: ScriptLoader())
    /// ```
    public func installLocal(from folder: URL, id: String, version: String) async throws -> InstalledPackage {
        // A directory URL (ending in `/`) as the source marks the version as local.
        let source = URL(fileURLWithPath: folder.standardizedFileURL.path, isDirectory: true)
        let descriptor = try PackageDescriptor(id: id, version: version, url: source)
        let owner = try await ledger.makeStaging()
        let verifier = configuration.verifier
        let staged: StagedPackage
        do {
            staged = try await FileSystem.offload {
                try LocalFolder.stage(folder, into: owner, verifier: verifier)
            }
        } catch {
            try? FileSystem.remove(owner.directory)
            owner.release()
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot copy the local patch", packageID: id)
        }
        let installed = try await installStaged(staged, descriptor, key: nil)
        guard let record = await ledger.cached?.packages[id] else {
            throw HotUpdateError(.internalInconsistency, "installed but not recorded", packageID: id)
        }
        return InstalledPackage(
            id: id,
            version: installed.version,
            directory: try layout.url(forRelativePath: installed.path),
            state: record.state,
            installedAt: installed.installedAt
        )
    }

    /// Whether a recorded source URL is a local folder (``installLocal(from:id:version:)``).
    static func isLocalSource(_ sourceURL: String) -> Bool {
        guard let url = URL(string: sourceURL) else { return false }
        return url.isFileURL && url.hasDirectoryPath
    }

    /// The ids among `candidates`, in the order of the last manifest, then the rest by id.
    private static func patchOrder(_ snapshot: StoreSnapshot, among candidates: Set<String>) -> [String] {
        let listed = (snapshot.manifestOrder ?? []).filter { candidates.contains($0) }
        let rest = candidates.subtracting(listed).sorted()
        return listed + rest
    }

    private func activate(_ ids: [String], with activator: any PatchActivator) async -> [ScriptPatch.Activation] {
        var results: [ScriptPatch.Activation] = []
        for id in ids {
            guard let record = await ledger.cached?.packages[id], let active = record.active, record.state != .disabled,
                let directory = try? layout.url(forRelativePath: active.path)
            else { continue }
            let patch = ScriptPatch(
                id: id,
                version: active.version,
                directory: directory,
                isLocal: Self.isLocalSource(active.sourceURL)
            )
            var result = ScriptPatch.Activation(id: id, version: active.version)
            do {
                try await activator.activate(patch)
            } catch {
                let cause: any Error & Sendable = (error as? HotUpdateError) ?? SendableErrorBox(error)
                result.error = HotUpdateError(
                    .activationFailed,
                    "the activation hook refused version \(active.version): \(error)",
                    packageID: id,
                    cause: cause
                )
            }
            await recordActivation(result)
            results.append(result)
        }
        return results
    }

    /// Records a failed activation as ``PackageState/failed``, and a successful one after a
    /// failure as ``PackageState/installed``; publishes the change.
    private func recordActivation(_ result: ScriptPatch.Activation) async {
        let id = result.id
        let changed = try? await ledger.transaction { next, _ in
            guard var record = next.packages[id], record.active?.version == result.version else { return false }
            let state: PackageState = result.succeeded ? .installed : .failed
            guard record.state != state || (!result.succeeded && record.lastError != result.error?.description),
                result.succeeded ? record.state == .failed : true
            else { return false }
            record.state = state
            record.lastError = result.error?.description
            record.lastErrorCode = result.error?.code.description
            next.packages[id] = record
            return true
        }
        if changed == true {
            hub.publish(id, result.version, result.succeeded ? .installed : .failed, result.error)
        }
        if let error = result.error {
            logger.warning("patch activation failed: \(error)", metadata: ["package": "\(id)"])
        }
    }
}

/// Copies a local folder into staging, hashing each file as it is copied.
enum LocalFolder {
    static func stage(_ folder: URL, into owner: StagingOwner, verifier: any Verifier) throws -> StagedPackage {
        let staging = owner.directory
        guard FileSystem.isDirectory(folder) else {
            throw HotUpdateError(.notFound, "the local patch folder is not a directory", subject: folder.path)
        }
        let tree = staging.appendingPathComponent("tree", isDirectory: true)
        try FileSystem.createDirectory(tree)
        var files: [FileList.Entry] = []
        var total: Int64 = 0
        try copy(folder, to: tree, relative: "", files: &files, total: &total, verifier: verifier)
        // The version's identity: a digest over its file list.
        let identity = try verifier.makeHasher(for: .sha256)
        for file in files.sorted(by: { $0.path < $1.path }) {
            identity.update(Data("\(file.path)\u{0}\(file.size)\u{0}\(file.sha256)\n".utf8))
        }
        return StagedPackage(
            owner: owner,
            tree: tree,
            size: total,
            sha256: identity.finalize(),
            md5: nil,
            files: files
        )
    }

    private static func copy(
        _ source: URL,
        to destination: URL,
        relative: String,
        files: inout [FileList.Entry],
        total: inout Int64,
        verifier: any Verifier
    ) throws {
        for name in FileSystem.contents(of: source).sorted() {
            let from = source.appendingPathComponent(name)
            let to = destination.appendingPathComponent(name)
            let path = relative.isEmpty ? name : relative + "/" + name
            if FileSystem.isDirectory(from) {
                try FileSystem.createDirectory(to)
                try copy(from, to: to, relative: path, files: &files, total: &total, verifier: verifier)
                continue
            }
            guard let info = FileInfo(from), info.isRegular else {
                throw HotUpdateError(
                    .unsafeEntry,
                    "only regular files and folders can be installed from a folder",
                    subject: path
                )
            }
            let data: Data
            do {
                data = try Data(contentsOf: from)
                try data.write(to: to)
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "cannot copy \(path)")
            }
            let hasher = try verifier.makeHasher(for: .sha256)
            hasher.update(data)
            files.append(FileList.Entry(path: path, size: Int64(data.count), sha256: hasher.finalize().hex))
            total += Int64(data.count)
        }
    }
}
