import Foundation
import HotArchive
import HotCore
import HotManifest
import HotStore
import HotVerify

extension Repository {
    /// How a folder is packed.
    public struct PackOptions: Sendable {
        /// Release the version once listed (else only list it, for a later ``Repository/release(_:version:channel:rollout:policy:)``).
        public var release: Bool
        /// Delta packages against this many of the package's last releases (0 for none).
        public var deltas: Int
        /// When clients download the package; nil keeps what the manifest says.
        public var delivery: DeliveryMode?
        /// Allow paths that differ only by case (clients on volumes that ignore case refuse
        /// the package).
        public var caseSensitive: Bool
        /// Also list the package's MD5, for clients that check nothing else.
        public var md5: Bool
        /// Encrypt the package and its deltas; the password goes into the manifest.
        public var encryption: ZipWriter.Encryption?

        /// Options; the defaults are `hot pack`'s.
        public init(
            release: Bool = true,
            deltas: Int = 5,
            delivery: DeliveryMode? = nil,
            caseSensitive: Bool = false,
            md5: Bool = false,
            encryption: ZipWriter.Encryption? = nil
        ) {
            (self.release, self.deltas, self.delivery) = (release, deltas, delivery)
            (self.caseSensitive, self.md5, self.encryption) = (caseSensitive, md5, encryption)
        }
    }

    /// What packing wrote.
    public struct Packed: Sendable {
        /// `packed web 12: 40 files, 81234 bytes, web-12-4f3a9c0d1e2f.zip, released`.
        public var summary: String
        /// The package file, named by its content, in `packages/`.
        public var archive: URL
        /// Its SHA-256, in hex.
        public var sha256: String
        /// The files packed.
        public var fileCount: Int
        /// A line for each delta package written.
        public var deltas: [String]
        /// Notes: a base no delta could be made from, a build that makes no binary patches, a
        /// package larger than clients accept by default.
        public var notes: [String]
        /// The file the change wrote unsigned, relative to the repository.
        public var unsignedPath: String
    }

    /// Zips `folder` into `packages/<id>-<version>-<sha256 prefix>.zip` (named by its content,
    /// so it never changes and a CDN may cache it for ever), writes delta packages against the
    /// package's last releases, lists the version in `channel`'s manifest (unsigned: sign it
    /// with ``sign(with:expires:channel:options:now:)``) and releases it.
    ///
    /// - Throws: `HotUpdateError.Code.notFound` for a folder that is not there;
    ///   `HotUpdateError.Code.invalidArgument` for a bad id or version, or a version listed
    ///   with other content; `HotUpdateError.Code.pathCollision` (and the other refusals
    ///   clients make) for names in the folder a client would refuse;
    ///   `HotUpdateError.Code.storeBusy` while another change holds the repository.
    public func pack(
        _ folder: URL,
        id: String,
        version: String,
        channel: String? = nil,
        options: PackOptions = PackOptions()
    ) async throws -> Packed {
        try Self.validate(channel: channel)
        let source = folder.standardizedFileURL
        guard FileSystem.isDirectory(source) else {
            throw HotUpdateError(.notFound, "not a directory", subject: source.path)
        }
        // Validates the id and the version.
        _ = try PackageDescriptor(id: id, version: version, url: URL(fileURLWithPath: "/"))
        guard options.deltas >= 0 else { throw HotUpdateError(.invalidArgument, "a count of deltas is 0 or more") }
        return try await lockedAwaiting {
            try await packHoldingLock(source, id: id, version: version, channel: channel, options: options)
        }
    }

    private func packHoldingLock(
        _ source: URL,
        id: String,
        version: String,
        channel: String?,
        options: PackOptions
    ) async throws -> Packed {
        let files = self.files
        // The package alone: in a sharded channel, its shard and the top document.
        var edit = try files.loadPackage(id, channel: channel)
        // Names every client would refuse are refused here, before anything is written.
        try PublishedNames.checkPack(
            source: source,
            id: id,
            caseSensitive: options.caseSensitive,
            existingIDs: edit.others
        )
        try FileSystem.createDirectory(files.packagesDirectory)
        let temporary = files.packagesDirectory.appendingPathComponent(".\(id)-\(version)-\(UUID().uuidString).zip")
        defer { try? FileSystem.remove(temporary) }
        // Each file's SHA-256 goes into the archive: clients that checked the archive against
        // the signed manifest take them instead of hashing every unpacked file again.
        // (Not in an encrypted archive, where they would let anyone confirm a guess of a file.)
        let zipOptions = ZipWriter.Options(
            fileHasher: { try CryptoVerifier().makeHasher(for: .sha256) },
            encryption: options.encryption
        )
        let summary = try ZipWriter.write(directory: source, to: temporary, options: zipOptions)
        let sha256 = try CryptoVerifier().digest(ofFile: temporary, using: .sha256)
        let archive = files.packagesDirectory.appendingPathComponent("\(id)-\(version)-\(sha256.hex.prefix(12)).zip")
        if !FileManager.default.fileExists(atPath: archive.path) {
            try FileSystem.rename(temporary, to: archive)
        }
        var entry = try files.versionEntry(of: archive, version: version, channel: channel, md5: options.md5)
        entry.unpackedSize = summary.uncompressedBytes
        entry.caseSensitive = options.caseSensitive ? true : nil
        entry.password = options.encryption?.password
        var notes: [String] = []
        if summary.uncompressedBytes > UpdaterConfiguration.defaultMaxPackageBytes {
            notes.append(
                "hot: warning: \(id) \(version) unpacks to \(summary.uncompressedBytes) bytes, more than the "
                    + "\(UpdaterConfiguration.defaultMaxPackageBytes) a client accepts by default; its apps "
                    + "must raise UpdaterConfiguration.maxPackageBytes (hot sync --max-package-bytes)"
            )
        }
        let deltaLines = Locked<[String]>([])
        let deltaNotes = Locked<[String]>([])
        let deltaEntries = try await DeltaBuilder(
            files: files,
            channel: channel,
            encryption: options.encryption,
            report: { line in deltaLines.withLock { $0.append(line) } },
            note: { line in deltaNotes.withLock { $0.append(line) } }
        ).build(package: edit.package, id: id, target: entry, targetTree: source, count: options.deltas)
        notes += deltaNotes.withLock { $0 }
        try edit.edit { package in
            try package.addVersion(entry)
            if !deltaEntries.isEmpty { package.setDeltas(deltaEntries, of: version) }
            if options.release { package.release(version, rollout: nil) }
            if let delivery = options.delivery { package.setDelivery(delivery) }
        }
        try files.save(edit, channel: channel)
        return Packed(
            summary:
                "packed \(id) \(version): \(summary.fileCount) files, \(entry.size) bytes, \(archive.lastPathComponent)"
                + (options.encryption.map { ", encrypted (\($0.method))" } ?? "")
                + (options.release ? ", released" : ""),
            archive: archive,
            sha256: sha256.hex,
            fileCount: summary.fileCount,
            deltas: deltaLines.withLock { $0 },
            notes: notes,
            unsignedPath: changedPath(channel)
        )
    }
}
