import Foundation

/// One thing the engine did, as a ``TelemetryReporter`` receives it.
///
/// Events carry package ids, versions, sizes and error codes: never a path, a device
/// identifier or an error's free text.
///
/// ```swift
/// struct PrintingReporter: TelemetryReporter {
///     func record(_ event: TelemetryEvent) {
///         print(event.kind, event.packageID ?? "-", event.version ?? "-", event.bytes ?? 0)
///     }
/// }
/// ```
public struct TelemetryEvent: Sendable, Hashable, Codable {
    /// What happened.
    public var kind: TelemetryEvent.Kind
    /// When.
    public var date: Date
    /// The package concerned; nil for a check.
    public var packageID: String?
    /// The version concerned: downloaded, installed, confirmed, rolled back or blocked.
    public var version: String?
    /// The manifest's version, for a check that read one.
    public var manifestVersion: Int?
    /// Bytes downloaded, for a download.
    public var bytes: Int64?
    /// Whether a download was the full package or a delta.
    public var delivery: TelemetryEvent.Delivery?
    /// The version active again after a rollback; nil: the copy bundled with the app.
    public var restoredVersion: String?
    /// The ``HotUpdateError/Code`` of a failed check, download or install, or of a block.
    public var errorCode: String?

    /// Creates an event.
    public init(
        kind: TelemetryEvent.Kind,
        date: Date = Date(),
        packageID: String? = nil,
        version: String? = nil,
        manifestVersion: Int? = nil,
        bytes: Int64? = nil,
        delivery: TelemetryEvent.Delivery? = nil,
        restoredVersion: String? = nil,
        errorCode: String? = nil
    ) {
        self.kind = kind
        self.date = date
        self.packageID = packageID
        self.version = version
        self.manifestVersion = manifestVersion
        self.bytes = bytes
        self.delivery = delivery
        self.restoredVersion = restoredVersion
        self.errorCode = errorCode
    }

    /// Whether the step failed (it carries an ``errorCode``); a block always carries one.
    public var failed: Bool { errorCode != nil && kind != .block }
}

extension TelemetryEvent {
    /// What an event reports. New kinds may be added: switch with a `default`.
    public struct Kind: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
        /// The name sent, such as `download`.
        public let rawValue: String

        /// Creates a kind.
        public init(rawValue: String) { self.rawValue = rawValue }

        /// A manifest was fetched (``Updater/sync(from:)``), or could not be.
        public static let check = Kind(rawValue: "check")
        /// A package was downloaded and checked, or its download failed.
        public static let download = Kind(rawValue: "download")
        /// A downloaded version was recorded in the store, or could not be.
        public static let install = Kind(rawValue: "install")
        /// A launch confirmed a guarded version (``UpdaterLaunch/confirm(_:)``).
        public static let confirm = Kind(rawValue: "confirm")
        /// A launch rolled back a version that an earlier launch never confirmed.
        public static let rollback = Kind(rawValue: "rollback")
        /// That version was blocked: no sync downloads it again.
        public static let block = Kind(rawValue: "block")
        /// A sync found the active version's files gone or damaged and made them whole again
        /// (``UpdatePlan/Change/heal``), or could not.
        public static let heal = Kind(rawValue: "heal")
        /// A launch ran without the store lock, which another process held past
        /// ``LaunchPolicy/lockDeadline``: no trial began and no waiting version took effect
        /// (``LaunchSession/deferred``); `errorCode` is ``HotUpdateError/Code/storeBusy``.
        public static let deferredLaunch = Kind(rawValue: "defer")
        /// A sync refused the rollout step served with the manifest and applied the release
        /// manifest alone (``SyncReport/refusedRollout``); `errorCode` says why.
        public static let rolloutRefused = Kind(rawValue: "refuse")

        public var description: String { rawValue }

        public init(from decoder: any Decoder) throws {
            rawValue = try decoder.singleValueContainer().decode(String.self)
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.singleValueContainer()
            try container.encode(rawValue)
        }
    }

    /// How a package's bytes came.
    public enum Delivery: String, Sendable, Hashable, Codable {
        /// The whole package.
        case full
        /// A delta against an installed version.
        case delta
    }
}

extension TelemetryEvent {
    /// The download of `descriptor` staged as `staged`: a delta installed is reported as one,
    /// with the delta's bytes; a refused delta as the full package, with the package's size.
    static func download(
        _ descriptor: PackageDescriptor,
        _ staged: StagedPackage,
        delta: SyncReport.DeltaUse?
    )
        -> TelemetryEvent
    {
        let isDelta = delta.map { $0.fallback == nil } ?? false
        return TelemetryEvent(
            kind: .download,
            packageID: descriptor.id,
            version: descriptor.version,
            bytes: isDelta ? staged.downloaded : staged.size,
            delivery: isDelta ? .delta : .full
        )
    }
}
