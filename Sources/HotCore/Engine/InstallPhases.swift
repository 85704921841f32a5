import Foundation

/// How long each phase of one package's install took, as the engine measured it: what a
/// slow install is made of, so the next regression has a name. `hot sync --timings` prints
/// it, and the install benchmark reports it beside the whole command's time.
package struct InstallPhases: Sendable, Hashable, Codable {
    /// From the package request to its last byte: the transfer, the hashing on the way, and
    /// the writes of the archive (or of the delta and the assembly of the full package).
    package var downloadSeconds: Double = 0
    /// Reading the archive and writing its tree in staging, every entry's CRC-32 checked.
    package var unpackSeconds: Double = 0
    /// Making every file of the tree an object (links under `objects/`), writing its file
    /// list and renaming the tree into `packages/`.
    package var adoptSeconds: Double = 0
    /// The flush of the file system, the commit hooks (the name index) and the store file.
    package var commitSeconds: Double = 0

    /// Creates empty timings.
    package init() {}

    /// Every phase together.
    package var totalSeconds: Double { downloadSeconds + unpackSeconds + adoptSeconds + commitSeconds }
}

/// Collects ``InstallPhases`` for the flight that set it as the task's recorder; the store's
/// work inherits it through the tasks it queues. Work outside a flight records nothing.
final class PhaseRecorder: Sendable {
    @TaskLocal static var current: PhaseRecorder?

    private let phases = Locked(InstallPhases())

    /// What was recorded.
    var recorded: InstallPhases { phases.value }

    /// Runs `body` and adds its duration to `phase` of the task's recorder, if any.
    static func measure<T>(
        _ phase: WritableKeyPath<InstallPhases, Double>,
        isolation: isolated (any Actor)? = #isolation,
        _ body: () async throws -> T
    ) async rethrows -> T {
        guard let recorder = current else { return try await body() }
        let clock = ContinuousClock()
        let start = clock.now
        defer {
            let seconds = (clock.now - start).timeInterval
            recorder.phases.withLock { $0[keyPath: phase] += seconds }
        }
        return try await body()
    }
}
