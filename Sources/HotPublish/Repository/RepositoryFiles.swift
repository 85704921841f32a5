import Foundation
import HotArchive
import HotCore
import HotManifest
import HotStore
import HotVerify

/// A static repository on disk: content-addressed package files shared by every channel,
/// and one manifest per channel.
///
/// ```
/// packages/<id>-<version>-<sha256 prefix>.zip   immutable, cacheable forever
/// manifest.json                                 the manifest when there are no channels
/// channels/<name>/manifest.json                 one manifest per channel
/// ```
package struct RepositoryFiles {
    package let root: URL

    /// The repository in directory `root`.
    package init(root: URL) {
        self.root = root
    }

    package var packagesDirectory: URL { root.appendingPathComponent("packages", isDirectory: true) }

    package func manifestURL(channel: String?) -> URL {
        guard let channel else { return root.appendingPathComponent("manifest.json") }
        return root.appendingPathComponent("channels/\(channel)/manifest.json")
    }

    /// The manifest's path relative to the repository, for messages.
    package func manifestPath(channel: String?) -> String {
        channel.map { "channels/\($0)/manifest.json" } ?? "manifest.json"
    }

    /// A package file's URL as written in the channel's manifest (relative to the manifest).
    package func packageReference(_ fileName: String, channel: String?) -> String {
        (channel == nil ? "" : "../../") + "packages/" + fileName
    }

    /// Every manifest in the repository, by channel (nil for the root manifest).
    package func channels() -> [String?] {
        var result: [String?] = []
        if FileManager.default.fileExists(atPath: manifestURL(channel: nil).path) { result.append(nil) }
        let channelsDirectory = root.appendingPathComponent("channels", isDirectory: true)
        for name in FileSystem.contents(of: channelsDirectory).sorted()
        where FileManager.default.fileExists(atPath: manifestURL(channel: name).path) {
            result.append(name)
        }
        return result
    }

    /// The served bytes of a channel's manifest.
    package func manifestData(channel: String?) throws -> Data {
        let url = manifestURL(channel: channel)
        do {
            return try Data(contentsOf: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .notFound, "cannot read \(manifestPath(channel: channel))")
        }
    }

    /// The channel's signed part; a new one when the manifest does not exist, and a
    /// schema-1 manifest converted (each package released at its listed version).
    /// A sharded channel's is read from its top document and shards.
    package func loadBody(channel: String?) throws -> SignedManifestBody {
        if isSharded(channel: channel) { return try loadShardedBody(channel: channel) }
        guard FileManager.default.fileExists(atPath: manifestURL(channel: channel).path) else {
            return SignedManifestBody(channel: channel)
        }
        let data = try manifestData(channel: channel)
        if let envelope = try SignedEnvelope.read(data) {
            // A rollout step signed by the rollout role is kept: the next release starts from it.
            return try envelope.effectiveBody(verifier: CryptoVerifier())
        }
        let document = try ManifestDocument.decode(data)
        var body = SignedManifestBody(version: document.version ?? 0, channel: channel)
        for entry in document.packages {
            var package = SignedManifestBody.Package(
                id: entry.id,
                releases: [entry.version],
                versions: [entry.versionEntry]
            )
            package.delivery = entry.delivery
            body.packages.append(package)
        }
        return body
    }

    /// The version of the channel's signed part as written (not raised by a rollout step),
    /// or nil when there is no manifest or it is a schema-1 document.
    package func signedPartVersion(channel: String?) throws -> Int? {
        if isSharded(channel: channel) { return try loadTop(channel: channel).top.version }
        guard FileManager.default.fileExists(atPath: manifestURL(channel: channel).path),
            let envelope = try SignedEnvelope.read(try manifestData(channel: channel))
        else { return nil }
        return try SignedManifestBody.decode(envelope.signed).version
    }

    /// Writes the channel's manifest with no signature (an edit invalidates the old ones): as
    /// shards and a top document when the channel is sharded or reaches
    /// ``shardThreshold`` packages.
    package func saveUnsigned(_ body: SignedManifestBody, channel: String?) throws {
        if isSharded(channel: channel) || body.packages.count >= Self.shardThreshold {
            return try saveSharded(body, channel: channel)
        }
        try write(SignedEnvelope(signed: try body.canonicalBytes(), signatures: []), channel: channel)
    }

    /// Writes an envelope as the channel's manifest, atomically.
    package func write(_ envelope: SignedEnvelope, channel: String?) throws {
        let url = manifestURL(channel: channel)
        try FileSystem.createDirectory(url.deletingLastPathComponent())
        let (head, tail) = try envelope.frame()
        try Self.replaceServed(url, with: [head, envelope.signed, tail])
    }

    /// Replaces a file the server answers conditional requests for, atomically, with a
    /// modification time at least a second past the one it had: static servers derive
    /// `Last-Modified` and `ETag` from the time in whole seconds and the size (nginx), so a
    /// file re-signed within the second to the same size would be answered `304 Not Modified`
    /// and clients would not see it until the next upload.
    package static func replaceServed(_ url: URL, with data: Data) throws {
        try replaceServed(url, with: [data])
    }

    /// ``replaceServed(_:with:)`` with the bytes of `parts`, one after the other.
    package static func replaceServed(_ url: URL, with parts: [Data]) throws {
        let previous = (try? FileManager.default.attributesOfItem(atPath: url.path)[.modificationDate]) as? Date
        try DurableFile.write(parts, to: url)
        guard let previous else { return }
        let now = Date()
        let next =
            now.timeIntervalSince1970.rounded(.down) > previous.timeIntervalSince1970.rounded(.down)
            ? now : Date(timeIntervalSince1970: previous.timeIntervalSince1970.rounded(.down) + 1)
        do {
            try FileManager.default.setAttributes([.modificationDate: next], ofItemAtPath: url.path)
        } catch {
            throw HotUpdateError.wrap(
                error,
                as: .fileSystem,
                "cannot set the modification time of \(url.lastPathComponent)"
            )
        }
    }

    /// The channel's timestamp: `timestamp.json` beside its manifest.
    package func timestampURL(channel: String?) -> URL {
        manifestURL(channel: channel).deletingLastPathComponent().appendingPathComponent(TimestampPart.fileName)
    }

    /// The timestamp's path relative to the repository, for messages.
    package func timestampPath(channel: String?) -> String {
        channel.map { "channels/\($0)/\(TimestampPart.fileName)" } ?? TimestampPart.fileName
    }

    /// Where the content-addressed copy of a manifest with SHA-256 `sha256` is:
    /// `manifests/<sha256>.json`, shared by every channel, never changed once written.
    package func contentAddressedManifestURL(sha256: String) -> URL {
        root.appendingPathComponent("manifests/\(sha256).json")
    }

    /// That copy's URL as a channel's timestamp names it (relative to the timestamp).
    package func contentAddressedManifestReference(sha256: String, channel: String?) -> String {
        (channel == nil ? "" : "../../") + "manifests/\(sha256).json"
    }

    /// Writes the content-addressed copy of served manifest bytes, unless it is there.
    package func writeContentAddressedManifest(_ data: Data, sha256: String) throws {
        let url = contentAddressedManifestURL(sha256: sha256)
        guard !FileManager.default.fileExists(atPath: url.path) else { return }
        try FileSystem.createDirectory(url.deletingLastPathComponent())
        try DurableFile.write(data, to: url)
    }

    /// Writes the channel's served timestamp, atomically.
    package func writeTimestamp(_ data: Data, channel: String?) throws {
        try Self.replaceServed(timestampURL(channel: channel), with: data)
    }

    /// Removes the channel's timestamp, if any: clients then read the manifest alone.
    package func removeTimestamp(channel: String?) throws {
        let url = timestampURL(channel: channel)
        guard FileManager.default.fileExists(atPath: url.path) else { return }
        do {
            try FileManager.default.removeItem(at: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot remove \(timestampPath(channel: channel))")
        }
    }

    /// The version entry of a package file already in `packages/`: `<id>-<version>-<sha>.zip`.
    ///
    /// - Throws: ``HotUpdateError/Code/notFound`` when none or several files match.
    package func findPackedVersion(id: String, version: String, channel: String?) throws -> SignedManifestBody.Version {
        let prefix = "\(id)-\(version)-"
        let matches = FileSystem.contents(of: packagesDirectory).filter {
            $0.hasPrefix(prefix) && $0.hasSuffix(".zip")
                && !$0.dropFirst(prefix.count).dropLast(4).contains("-")
        }
        guard matches.count == 1, let name = matches.first else {
            throw HotUpdateError(
                .notFound,
                matches.isEmpty
                    ? "version \(version) is not packed in this repository (hot pack it first)"
                    : "several files hold version \(version): \(matches.sorted().joined(separator: ", "))",
                packageID: id
            )
        }
        return try versionEntry(of: packagesDirectory.appendingPathComponent(name), version: version, channel: channel)
    }

    /// Measures a package file for the manifest: its size and SHA-256, and its MD5 when
    /// `md5` is set (for clients that check nothing else; ours check the SHA-256 alone).
    package func versionEntry(
        of file: URL,
        version: String,
        channel: String?,
        md5: Bool = false
    ) throws -> SignedManifestBody.Version {
        let verifier = CryptoVerifier()
        let size = try FileManager.default.attributesOfItem(atPath: file.path)[.size] as? NSNumber
        return SignedManifestBody.Version(
            version: version,
            url: packageReference(file.lastPathComponent, channel: channel),
            size: size?.int64Value ?? 0,
            sha256: try verifier.digest(ofFile: file, using: .sha256).hex,
            md5: md5 ? try verifier.digest(ofFile: file, using: .md5).hex : nil
        )
    }
}

extension SignedManifestBody.Package {
    /// Adds `entry` to the versions, refusing other content under a version already listed.
    package mutating func addVersion(_ entry: SignedManifestBody.Version) throws {
        if let existing = self.entry(for: entry.version) {
            guard existing.sha256 == entry.sha256 else {
                throw HotUpdateError(
                    .invalidArgument,
                    "version \(entry.version) is already listed with other content (sha256 \(existing.sha256.prefix(12))…); versions are immutable, pick a new one",
                    packageID: id
                )
            }
            return
        }
        versions.append(entry)
    }

    /// Makes `version` the current release; a rollout applies to this release only.
    package mutating func release(_ version: String, rollout: Int?) {
        if releases.last != version { releases.append(version) }
        self.rollout = rollout
    }
}

extension SignedManifestBody.Package {
    /// Records `mode`; prefetch, the default, is written as no field, so a manifest that never
    /// used delivery modes stays byte-identical.
    package mutating func setDelivery(_ mode: DeliveryMode) {
        delivery = mode == .prefetch ? nil : mode
    }
}
