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
    /// The directory of the version, or one above it under the store root, that is not a
    /// real directory (a symbolic link, perhaps out of the store, or another kind of file),
    /// relative to the root; nil when the tree is in place. Nothing was read through it, and
    /// every file counts as ``missing``.
    public var outsideStore: String?

    /// Creates a value.
    public init(
        id: String,
        version: String,
        depth: PackageHealth.Depth,
        filesChecked: Int,
        missing: [String],
        damaged: [String],
        outsideStore: String? = nil
    ) {
        self.id = id
        self.version = version
        self.depth = depth
        self.filesChecked = filesChecked
        self.missing = missing
        self.damaged = damaged
        self.outsideStore = outsideStore
    }

    /// Whether every file is as installed.
    public var isHealthy: Bool { missing.isEmpty && damaged.isEmpty && outsideStore == nil }

    /// The state the findings put the package in.
    public var state: PackageState {
        if outsideStore != nil { return .treeOutsideStore }
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
        /// Presence, size and modification time of every file: one `lstat` each, fit for
        /// launch time. A file whose modification time shows a write since the install is
        /// hashed (see ``Depth/full``): a same-size edit in place is found too.
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
        /// Files of other kept versions (of this package or another) that shared a repaired
        /// file's content and were linked to its good object again.
        public var relinked: [PackageHealth.RelinkedFile]

        /// Creates a value.
        public init(
            id: String,
            before: PackageHealth,
            restored: [String],
            refetched: Bool,
            after: PackageHealth,
            error: HotUpdateError? = nil,
            relinked: [PackageHealth.RelinkedFile] = []
        ) {
            self.id = id
            self.before = before
            self.restored = restored
            self.refetched = refetched
            self.after = after
            self.error = error
            self.relinked = relinked
        }

        /// Whether the package is whole again.
        public var succeeded: Bool { after.isHealthy && error == nil }
    }
}

extension PackageHealth {
    /// A file of a kept version that a repair linked to the good object of its content again:
    /// it shared that content (one object, hard-linked into every tree that has it) with the
    /// file repaired, so the damage was in it too.
    public struct RelinkedFile: Sendable, Hashable {
        /// The package whose version it belongs to.
        public var packageID: String
        /// The version.
        public var version: String
        /// The file's path inside the version's tree.
        public var path: String

        /// Creates a value.
        public init(packageID: String, version: String, path: String) {
            self.packageID = packageID
            self.version = version
            self.path = path
        }
    }
}

extension PackageHealth {
    /// Compares the files of a tree with its file list: presence and size of each, and its
    /// SHA-256 at ``Depth/full`` or when its modification time shows it was written since the
    /// install (``ObjectStore/pinnedModification``; an intact one gets that time back). A file reached through a folder that is not a real directory
    /// (a symbolic link) counts as missing, and nothing is read through that folder. Blocking:
    /// run it through ``FileSystem/offload(_:)``.
    ///
    /// - Returns: The paths missing (or no longer regular files) and those damaged.
    static func examine(
        _ files: [FileList.Entry],
        under root: URL,
        depth: PackageHealth.Depth,
        verifier: any Verifier
    ) -> (missing: [String], damaged: [String]) {
        var missing: [String] = []
        var damaged: [String] = []
        // Plain path strings: building a URL per file would cost more than the lstat.
        let base = root.path.hasSuffix("/") ? root.path : root.path + "/"
        var folders = ContainedDirectory.Folders(tree: base)
        for file in files {
            guard folders.holdsReal(file.path), let info = FileInfo(path: base + file.path), info.isRegular else {
                missing.append(file.path)
                continue
            }
            if info.size != file.size {
                damaged.append(file.path)
            } else if depth == .full || !info.isPinned {
                // Written or touched since the install (its modification time is not the one
                // the store gives installed files): the content decides. One that is intact
                // gets the pinned time back, so the next check does not hash it again.
                let path = base + file.path
                guard (try? verifier.digest(ofFile: URL(fileURLWithPath: path), using: .sha256).hex) == file.sha256
                else {
                    damaged.append(file.path)
                    continue
                }
                if !info.isPinned { ObjectStore.pin(path) }
            }
        }
        return (missing, damaged)
    }
}
