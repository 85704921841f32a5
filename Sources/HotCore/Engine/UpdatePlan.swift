import Foundation

/// What a sync will do, package by package, computed from a manifest and the store.
public struct UpdatePlan: Hashable, Sendable {
    /// The manifest the plan was made from.
    public var manifest: Manifest
    /// One entry per package in the manifest or the store, in manifest order, removals last.
    public var packages: [UpdatePlan.PackagePlan]

    /// Creates a plan.
    public init(manifest: Manifest, packages: [UpdatePlan.PackagePlan]) {
        self.manifest = manifest
        self.packages = packages
    }

    /// Whether the plan changes anything.
    public var isEmpty: Bool { packages.allSatisfy { $0.change == .unchanged || $0.change == .notRequested } }

    /// The packages that will be downloaded.
    public var downloads: [PackageDescriptor] {
        packages.compactMap { $0.change.downloads ? $0.offered : nil }
    }

    /// Compares a manifest with a store snapshot.
    ///
    /// A package is unchanged when its version and its digest (SHA-256 when both sides
    /// have one, else MD5) match the active version; otherwise it is added or updated.
    /// When the manifest is complete, installed packages it does not list are removed.
    /// An installed package the manifest disables is disabled (its files stay); when the
    /// manifest offers its installed version again, it is enabled without a download. When
    /// it offers a version kept for rollback (same version and digest), that version is
    /// restored without a download. A version a failed launch blocked (see
    /// ``PackageRecord/BlockedVersion``) is neither downloaded nor restored while it blocks at `now`; a
    /// version installed and waiting for the next launch is not downloaded again. An
    /// ``DeliveryMode/onDemand`` package the store has no record of (the app never asked for
    /// it, or it was evicted) is ``UpdatePlan/Change/notRequested``: nothing is downloaded.
    public static func make(manifest: Manifest, snapshot: StoreSnapshot, now: Date = Date()) -> UpdatePlan {
        var entries: [UpdatePlan.PackagePlan] = []
        for offered in manifest.packages {
            let record = snapshot.packages[offered.id]
            let installed = record?.active
            let change: UpdatePlan.Change
            if record == nil, offered.delivery == .onDemand {
                change = .notRequested
            } else if let record, record.blocking(offered, at: now) != nil,
                !(installed.map { Self.isSame(offered, $0) } ?? false)
            {
                change = .blocked
            } else if let waiting = record?.pending, Self.isSame(offered, waiting) {
                change = .unchanged
            } else if let installed {
                if Self.isSame(offered, installed) {
                    change = record?.state == .disabled ? .enable : .unchanged
                } else if record?.previous.contains(where: { Self.isSame(offered, $0) }) == true {
                    change = .restore
                } else {
                    change = .update
                }
            } else {
                change = .add
            }
            entries.append(
                UpdatePlan.PackagePlan(id: offered.id, change: change, offered: offered, installed: installed)
            )
        }
        for id in manifest.disabledPackageIDs.sorted() {
            guard let record = snapshot.packages[id] else { continue }
            let change: UpdatePlan.Change = record.state == .disabled ? .unchanged : .disable
            entries.append(UpdatePlan.PackagePlan(id: id, change: change, offered: nil, installed: record.active))
        }
        if manifest.isComplete {
            let listed = Set(manifest.packages.map(\.id)).union(manifest.disabledPackageIDs)
            for id in snapshot.packages.keys.sorted() where !listed.contains(id) {
                entries.append(
                    UpdatePlan.PackagePlan(
                        id: id,
                        change: .remove,
                        offered: nil,
                        installed: snapshot.packages[id]?.active
                    )
                )
            }
        }
        return UpdatePlan(manifest: manifest, packages: entries)
    }

    /// Whether an offered package is the installed version.
    public static func isSame(_ offered: PackageDescriptor, _ installed: InstalledVersion) -> Bool {
        guard offered.version == installed.version else { return false }
        if let sha = offered.sha256, let installedSHA = installed.sha256 {
            return sha.hex == installedSHA.lowercased()
        }
        if let md5 = offered.md5, let installedMD5 = installed.md5 {
            return md5.hex == installedMD5.lowercased()
        }
        return false
    }
}

extension UpdatePlan {
    /// What a sync will do to one package.
    public struct Change: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// The package is not installed: download and install it.
        public static let add = UpdatePlan.Change("add")
        /// Another version is installed: download and install this one, keep the old for rollback.
        public static let update = UpdatePlan.Change("update")
        /// The installed version is current: nothing to do.
        public static let unchanged = UpdatePlan.Change("unchanged")
        /// The manifest no longer lists the package: remove it.
        public static let remove = UpdatePlan.Change("remove")
        /// The manifest disables the package: keep its files, stop resolving from it.
        public static let disable = UpdatePlan.Change("disable")
        /// The manifest offers the disabled package's installed version again: resolve from it
        /// again, with no download.
        public static let enable = UpdatePlan.Change("enable")
        /// The manifest offers a version kept for rollback (a server-side rollback): make it
        /// active again, with no download.
        public static let restore = UpdatePlan.Change("restore")
        /// The manifest offers a version a failed launch blocked: nothing is downloaded or
        /// restored, what is active stays.
        public static let blocked = UpdatePlan.Change("blocked")
        /// Reported, never planned: the installed version was current but its files were gone
        /// or damaged, and the sync made them whole again, from the store's objects or by
        /// downloading the version again.
        public static let heal = UpdatePlan.Change("heal")
        /// An ``DeliveryMode/onDemand`` package the app has not asked for (or that was
        /// evicted): nothing is downloaded until ``Updater/install(id:)`` asks for it.
        public static let notRequested = UpdatePlan.Change("notRequested")
        public var description: String { name }

        /// Whether the change downloads anything.
        public var downloads: Bool { self == .add || self == .update }
    }

    /// The plan for one package.
    public struct PackagePlan: Hashable, Sendable {
        /// The package id.
        public var id: String
        /// What will happen.
        public var change: UpdatePlan.Change
        /// What the manifest offers; nil for ``UpdatePlan/Change/remove``.
        public var offered: PackageDescriptor?
        /// What is installed now, if anything.
        public var installed: InstalledVersion?

        /// Creates a plan entry.
        public init(id: String, change: UpdatePlan.Change, offered: PackageDescriptor?, installed: InstalledVersion?) {
            self.id = id
            self.change = change
            self.offered = offered
            self.installed = installed
        }
    }
}
