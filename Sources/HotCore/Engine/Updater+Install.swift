import Foundation
import Logging

extension Updater {
    /// Hands a staged package to the store's next install group (see ``Store/install(_:)``)
    /// and publishes the version recorded.
    ///
    /// - Parameter key: The flight that staged it; nil for a local folder.
    func installStaged(
        _ staged: StagedPackage,
        _ offered: PackageDescriptor,
        key: FlightKey?
    ) async throws
        -> InstalledVersion
    {
        let asked = key.flatMap { requested[$0] }
        let seen: Int
        if let asked {
            seen = asked.generation
        } else {
            seen = await seenGeneration()
        }
        let request = InstallRequest(
            staged: staged,
            offered: offered,
            chosenAt: asked?.date ?? Date(),
            seenGeneration: seen,
            newerRequest: { [weak self] in await self?.newerRequest(than: key, for: offered.id) },
            policy: configuration.launch,
            keep: configuration.keepPreviousVersions
        )
        let version = try await store.install(request)
        hub.publish(offered.id, offered.version, .installed)
        logger.info("installed", metadata: ["package": "\(offered.id)", "version": "\(offered.version)"])
        return version
    }

    /// The version asked for since `key` was, when a newer request for `id` is running in
    /// this process; nil when `key` is still the newest (or installs a local folder).
    private func newerRequest(than key: FlightKey?, for id: String) -> String? {
        guard let key, let newest = wanted[id], newest.key != key else { return nil }
        return newest.key.version
    }

    /// Records a failure (state ``PackageState/failed`` with the error) and publishes it.
    func recordFailure(_ id: String, version: String?, _ error: HotUpdateError) async {
        hub.publish(id, version, .failed, error)
        do {
            try await store.recordFailure(id, error)
        } catch {
            logger.error("cannot record the failure of \(id): \(error)")
        }
    }

    /// How many staged packages wait for the next install group (for tests).
    package var pendingInstallCount: Int {
        get async { await store.waitingInstallCount }
    }
}
