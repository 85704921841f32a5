import Foundation

/// One package as a manifest describes it: what to download and how to check it.
public struct PackageDescriptor: Sendable, Hashable {
    /// The package's identifier, stable across versions (`"images"`, `"h5-home"`).
    public var id: String
    /// The version the manifest offers. Compared for equality only; digests decide what changed.
    public var version: String
    /// Where the package archive is, absolute.
    public var url: URL
    /// The archive's exact size in bytes, when the source knows it.
    public var size: Int64?
    /// The archive's SHA-256, when the source knows it.
    public var sha256: Digest?
    /// The archive's MD5, for older servers that publish nothing better.
    public var md5: Digest?
    /// The password of an encrypted archive, if any.
    public var password: String?
    /// Delta packages from earlier versions to this one, smallest first is not required:
    /// the updater picks the one whose base is its active version.
    public var deltas: [PackageDescriptor.Delta] = []

    /// Creates a descriptor.
    ///
    /// - Throws: ``HotUpdateError/Code/manifestInvalid`` when `id` or `version` is not a safe
    ///   path component (they name directories in the store).
    /// Whether the package is for case-sensitive file systems only: its paths may differ only
    /// by case. A store on a volume that ignores case (macOS's and iOS's default) refuses it
    /// before downloading it (``HotUpdateError/Code/pathCollision``).
    public var caseSensitive = false
    /// The bytes the package holds once unpacked, when the manifest declares them: then that
    /// exact figure is the unarchiver's limit (``ExtractOptions/maxTotalBytes``), and a package
    /// declaring more than ``UpdaterConfiguration/maxPackageBytes`` is refused before download.
    public var unpackedSize: Int64? = nil
    /// When the package is downloaded (``DeliveryMode``): ``DeliveryMode/prefetch`` unless the
    /// manifest says otherwise. A sync skips an ``DeliveryMode/onDemand`` package the app never
    /// asked for.
    public var delivery: DeliveryMode = .prefetch

    public init(
        id: String,
        version: String,
        url: URL,
        size: Int64? = nil,
        sha256: Digest? = nil,
        md5: Digest? = nil,
        password: String? = nil
    ) throws {
        try Self.validateComponent(id, what: "package id")
        try Self.validateComponent(version, what: "version of package \(id)")
        if let size, size < 0 {
            throw HotUpdateError(.manifestInvalid, "negative size \(size)", packageID: id)
        }
        self.id = id
        self.version = version
        self.url = url
        self.size = size
        self.sha256 = sha256
        self.md5 = md5
        self.password = password
    }

    /// The strongest digest the descriptor carries: SHA-256, else MD5, else nil.
    public var strongestDigest: Digest? { sha256 ?? md5 }

    /// Checks that `value` can name a directory: 1–128 characters from
    /// `A–Z a–z 0–9 . _ - + ~`, not `.` or `..`.
    public static func validateComponent(_ value: String, what: String) throws {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-+~".utf8)
        guard !value.isEmpty, value.utf8.count <= 128, value != ".", value != "..",
            value.utf8.allSatisfy({ allowed.contains($0) })
        else {
            throw HotUpdateError(
                .manifestInvalid,
                "\(what) '\(value)' must be 1–128 characters of letters, digits and . _ - + ~"
            )
        }
    }
}

/// What is current, as a ``ManifestSource`` reports it.
public struct Manifest: Sendable, Hashable {
    /// The format's schema number.
    public var schema: Int
    /// The manifest's own version, increasing with every release, when the format has one.
    public var version: Int?
    /// The packages that are current. Package ids are unique.
    public var packages: [PackageDescriptor]
    /// Whether the list is complete: when true, an installed package missing from it is removed.
    public var isComplete: Bool
    /// Packages the client must stop using (disabled by the publisher, or withheld from this
    /// client by its policy): their files stay, assets resolve from the bundle instead.
    public var disabledPackageIDs: Set<String>
    /// Identifies this manifest as its source made it for this client: two fetches with the same
    /// revision give the same manifest. A ``RevisionedManifestSource`` sets it; nil otherwise.
    /// A sync that leaves nothing to do records it, and the next sync asks the source whether
    /// the manifest is still this one before reading it.
    public var revision: String?
    /// A rollout step served with the manifest that the client refused (HotManifest's rollout
    /// role: a step beyond the role's bounds, or not signed by a threshold of its keys): the
    /// manifest is the release manifest alone, as the release keys signed it. A sync reports
    /// it (``SyncReport/refusedRollout``) and sends it as telemetry.
    public var refusedRollout: Refusal?

    /// Why a part served with the manifest was refused.
    public struct Refusal: Sendable, Hashable, CustomStringConvertible {
        /// The refusal's code, such as `rolloutRoleExceeded` or `signatureInvalid`.
        public var code: HotUpdateError.Code
        /// What was refused, and why.
        public var message: String

        /// Creates a refusal.
        public init(code: HotUpdateError.Code, message: String) {
            self.code = code
            self.message = message
        }

        /// The refusal as an error, for logs and telemetry.
        public var error: HotUpdateError { HotUpdateError(code, message) }

        /// `rolloutRoleExceeded: the message`.
        public var description: String { "\(code): \(message)" }
    }

    /// Creates a manifest.
    ///
    /// - Throws: ``HotUpdateError/Code/manifestInvalid`` when two packages share an id, or a
    ///   package is both offered and disabled; ``HotUpdateError/Code/pathCollision`` when two
    ///   ids differ only by case (their directories would be one on a case-insensitive volume).
    public init(
        schema: Int = 1,
        version: Int? = nil,
        packages: [PackageDescriptor],
        isComplete: Bool = true,
        disabledPackageIDs: Set<String> = []
    ) throws {
        var seen = Set<String>()
        for package in packages where !seen.insert(package.id).inserted {
            throw HotUpdateError(.manifestInvalid, "package id '\(package.id)' appears twice")
        }
        try PathCollision.check(
            packages.map(\.id) + disabledPackageIDs.sorted(),
            caseSensitive: false,
            what: "the manifest's package ids"
        )
        if let both = disabledPackageIDs.intersection(seen).sorted().first {
            throw HotUpdateError(.manifestInvalid, "package '\(both)' is both offered and disabled")
        }
        self.schema = schema
        self.version = version
        self.packages = packages
        self.isComplete = isComplete
        self.disabledPackageIDs = disabledPackageIDs
    }
}
