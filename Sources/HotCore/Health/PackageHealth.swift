import Foundation

/// What a check found in the active version of one package.
public struct PackageHealth: Sendable, Hashable {
    /// The package id.
    public var id: String
    /// The version checked.
    public var version: String
    /// How deep the check went.
    public var depth: PackageHealth.Depth
    /// Files checked.
    public var filesChecked: Int
    /// Files that are missing (or no longer regular files).
    public var missing: [String]
    /// Files whose size or SHA-256 differs from what was installed.
    public var damaged: [String]

    /// Creates a value.
    public init(
        id: String,
        version: String,
        depth: PackageHealth.Depth,
        filesChecked: Int,
        missing: [String],
        damaged: [String]
    ) {
        self.id = id
        self.version = version
        self.depth = depth
        self.filesChecked = filesChecked
        self.missing = missing
        self.damaged = damaged
    }

    /// Whether every file is as installed.
    public var isHealthy: Bool { missing.isEmpty && damaged.isEmpty }

    /// The state the findings put the package in.
    public var state: PackageState {
        if !missing.isEmpty { return .fileMissing }
        if !damaged.isEmpty { return .digestMismatch }
        return .installed
    }
}

extension PackageHealth {
    /// How thoroughly installed files are checked.
    public struct Depth: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// Presence and size of every file: one `lstat` each, fit for launch time.
        public static let quick = PackageHealth.Depth("quick")
        /// Presence, size and SHA-256 of every file.
        public static let full = PackageHealth.Depth("full")
        public var description: String { name }
    }
}

extension PackageHealth {
    /// What a repair did to one package.
    public struct RepairReport: Sendable {
        /// The package id.
        public var id: String
        /// What the check before the repair found.
        public var before: PackageHealth
        /// Files put back from `objects/`, with no network.
        public var restored: [String]
        /// Whether the package had to be downloaded again (an object was missing or damaged too).
        public var refetched: Bool
        /// What the check after the repair found.
        public var after: PackageHealth
        /// Why the repair could not finish, if it could not (for example no network for a re-fetch).
        public var error: HotUpdateError?

        /// Creates a value.
        public init(
            id: String,
            before: PackageHealth,
            restored: [String],
            refetched: Bool,
            after: PackageHealth,
            error: HotUpdateError? = nil
        ) {
            self.id = id
            self.before = before
            self.restored = restored
            self.refetched = refetched
            self.after = after
            self.error = error
        }

        /// Whether the package is whole again.
        public var succeeded: Bool { after.isHealthy && error == nil }
    }
}
