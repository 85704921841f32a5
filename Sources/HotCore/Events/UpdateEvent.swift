/// Something the updater did, published to every ``Updater/events(bufferingNewest:)`` subscriber.
///
/// ```swift
/// for await event in await updater.events() {
///     switch event {
///     case .state(let change): print(change.id, change.state)
///     case .progress(let progress): print(progress.id, progress.bytesReceived)
///     case .overall(let overall): print(overall.fractionCompleted ?? 0)
///     }
/// }
/// ```
public enum UpdateEvent: Sendable {
    /// A package moved to another state.
    case state(UpdateEvent.StateChange)
    /// A package's download or unpacking advanced.
    case progress(UpdateEvent.PackageProgress)
    /// The sum over every package being worked on advanced.
    case overall(UpdateEvent.OverallProgress)
    /// A delta was refused; the full package is fetched instead.
    case deltaFallback(UpdateEvent.DeltaFallback)
}

extension UpdateEvent {
    /// A delta refused, and the full package fetched instead.
    public struct DeltaFallback: Sendable {
        /// The package id.
        public var id: String
        /// The version being installed.
        public var version: String
        /// The installed version the delta was made against.
        public var baseVersion: String
        /// Why the delta was refused.
        public var error: HotUpdateError

        /// Creates a value.
        public init(id: String, version: String, baseVersion: String, error: HotUpdateError) {
            self.id = id
            self.version = version
            self.baseVersion = baseVersion
            self.error = error
        }
    }
}

extension UpdateEvent {
    /// A package's move to another state.
    public struct StateChange: Sendable {
        /// The package id.
        public var id: String
        /// The version concerned: the one being installed, or the active one.
        public var version: String?
        /// The new state.
        public var state: PackageState
        /// Why, when ``state`` is ``PackageState/failed``, ``PackageState/fileMissing`` or
        /// ``PackageState/digestMismatch``.
        public var error: HotUpdateError?

        /// Creates a value.
        public init(id: String, version: String?, state: PackageState, error: HotUpdateError? = nil) {
            self.id = id
            self.version = version
            self.state = state
            self.error = error
        }
    }

    /// How far one package's flight has come.
    public struct PackageProgress: Sendable, Hashable {
        /// The package id.
        public var id: String
        /// The version being installed.
        public var version: String
        /// Bytes of the archive received.
        public var bytesReceived: Int64
        /// The archive's size, when the manifest or the server says it.
        public var bytesExpected: Int64?
        /// Files unpacked.
        public var filesUnpacked: Int
        /// Files in the archive, once unpacking started.
        public var filesTotal: Int?

        /// Creates a value.
        public init(
            id: String,
            version: String,
            bytesReceived: Int64 = 0,
            bytesExpected: Int64? = nil,
            filesUnpacked: Int = 0,
            filesTotal: Int? = nil
        ) {
            self.id = id
            self.version = version
            self.bytesReceived = bytesReceived
            self.bytesExpected = bytesExpected
            self.filesUnpacked = filesUnpacked
            self.filesTotal = filesTotal
        }
    }

    /// Progress summed over every package the updater has worked on since it was last idle.
    public struct OverallProgress: Sendable, Hashable {
        /// Packages started since the updater was last idle.
        public var packagesTotal: Int
        /// Of those, packages finished (installed, failed or cancelled).
        public var packagesFinished: Int
        /// Bytes received over all of them.
        public var bytesReceived: Int64
        /// Bytes expected over those whose size is known.
        public var bytesExpected: Int64

        /// Creates a value.
        public init(packagesTotal: Int, packagesFinished: Int, bytesReceived: Int64, bytesExpected: Int64) {
            self.packagesTotal = packagesTotal
            self.packagesFinished = packagesFinished
            self.bytesReceived = bytesReceived
            self.bytesExpected = bytesExpected
        }

        /// Bytes received over bytes expected, when any size is known.
        public var fractionCompleted: Double? {
            bytesExpected > 0 ? min(1, Double(bytesReceived) / Double(bytesExpected)) : nil
        }
    }
}
