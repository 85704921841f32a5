import Foundation
import Logging

/// The script-patch part of an ``Updater``: activating installed patches at launch,
/// syncing with a patch list, and installing a patch from a local folder. Reach it as
/// ``Updater/patches``.
///
/// ```swift
/// let patches = Updater(configuration: patchesConfiguration)   // a store of its own
/// for result in await patches.patches.activateInstalled(with: ScriptLoader()) where !result.succeeded {
///     log(result.error)
/// }
/// ```
public struct UpdaterPatches: Sendable {
    let updater: Updater

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
    /// for result in await updater.patches.activateInstalled(with: ScriptLoader()) where !result.succeeded {
    ///     log(result.error)
    /// }
    /// ```
    public func activateInstalled(with activator: any PatchActivator) async -> [ScriptPatch.Activation] {
        guard let snapshot = try? await updater.store.read() else { return [] }
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
    /// let (report, activations) = try await updater.patches.sync(from: patchList, activator: ScriptLoader())
    /// ```
    public func sync(
        from source: any ManifestSource,
        activator: any PatchActivator
    ) async throws
        -> (report: SyncReport, activations: [ScriptPatch.Activation])
    {
        let report = try await updater.sync(from: source)
        let changed = Set(report.packages.filter { $0.change.downloads && $0.succeeded }.map(\.id))
        let snapshot = try await updater.store.read()
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
    /// let patch = try await updater.patches.patches.installLocal(from: debugFolder, id: "debug", version: "local-1")
    /// _ = await updater.patches.activateInstalled(with: ScriptLoader())
    /// ```
    public func installLocal(from folder: URL, id: String, version: String) async throws -> InstalledPackage {
        // A directory URL (ending in `/`) as the source marks the version as local.
        let source = URL(fileURLWithPath: folder.standardizedFileURL.path, isDirectory: true)
        let descriptor = try PackageDescriptor(id: id, version: version, url: source)
        let owner = try await updater.store.makeStaging()
        let verifier = updater.configuration.verifier
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
        let installed = try await updater.installStaged(staged, descriptor, key: nil)
        guard let record = await updater.store.cachedRecord(id) else {
            throw HotUpdateError(.internalInconsistency, "installed but not recorded", packageID: id)
        }
        return try updater.store.installedPackage(record, version: installed)
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
            guard let record = await updater.store.cachedRecord(id), let active = record.active,
                record.state != .disabled, let directory = try? updater.store.directory(of: active)
            else { continue }
            let patch = ScriptPatch(
                id: id,
                version: active.version,
                directory: directory,
                isLocal: LocalFolder.isLocalSource(active.sourceURL)
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
        let changed = try? await updater.store.recordActivation(result)
        if changed == true {
            updater.hub.publish(id, result.version, result.succeeded ? .installed : .failed, result.error)
        }
        if let error = result.error {
            updater.logger.warning("patch activation failed: \(error)", metadata: ["package": "\(id)"])
        }
    }
}
