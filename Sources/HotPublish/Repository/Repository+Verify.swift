import Foundation
import HotCore
import HotManifest
import HotVerify

extension Repository {
    /// What a check of a repository found.
    public struct Verification: Sendable, Hashable {
        /// Each problem, a line each (`manifest.json: expired at …`); none when it passes.
        public var problems: [String]
        /// Notes that are not problems (a timestamp naming an earlier manifest).
        public var notes: [String]
        /// The manifests checked.
        public var manifests: Int
        /// The package files checked.
        public var packageFiles: Int
        /// Whether nothing is wrong.
        public var passed: Bool { problems.isEmpty }
    }

    /// Checks the repository before it is published: every manifest (`manifest.json` and
    /// `channels/*/manifest.json`) signed by `threshold` of `keys` and by its own declared
    /// threshold, not expired, releasing only versions it lists; every listed package file
    /// there with its size, SHA-256 and MD5 and no two paths that are one name on some file
    /// system; no file in `packages/` that no manifest lists; each channel's timestamp naming
    /// bytes the repository holds, and one clients accept.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` with no key; the problems found are
    ///   returned, not thrown.
    public func verify(trusting keys: [PublicKey], threshold: Int = 1) async throws -> Verification {
        let verifier = CryptoVerifier()
        let trusted = try Self.trustTable(keys, verifier: verifier)
        let files = self.files
        let channels = files.channels()
        var problems: [String] = []
        var notes: [String] = []
        var referenced = Set<String>()
        if channels.isEmpty { problems.append("no manifest.json and no channels/*/manifest.json") }

        for channel in channels {
            let name = files.manifestPath(channel: channel)
            let data: Data
            do {
                data = try files.manifestData(channel: channel)
            } catch let error as HotUpdateError {
                problems.append("\(name): \(error.message)")
                continue
            }
            let (checkedBody, manifestProblems) = Self.checkManifest(
                data,
                name: name,
                trusted: trusted,
                threshold: threshold,
                verifier: verifier
            )
            problems += manifestProblems
            guard let body = checkedBody else { continue }
            if body.channel != channel {
                problems.append("\(name): declares channel '\(body.channel ?? "(none)")'")
            }
            problems += Self.checkTimestamp(
                files: files,
                channel: channel,
                manifest: data,
                verifier: verifier,
                notes: &notes
            )
            let manifestURL = files.manifestURL(channel: channel)
            for package in body.packages {
                for version in package.versions {
                    let label = "\(name): \(package.id) \(version.version)"
                    guard let url = URL(string: version.url, relativeTo: manifestURL)?.standardizedFileURL,
                        url.isFileURL
                    else {
                        continue  // an absolute URL elsewhere: not this repository's file
                    }
                    referenced.insert(url.path)
                    let found = Self.check(version, at: url, label: label, verifier: verifier)
                    problems += found
                    if found.isEmpty {
                        problems += await PublishedNames.archiveProblems(of: version, at: url, label: label)
                    }
                }
            }
        }
        let packagesDirectory = files.packagesDirectory.standardizedFileURL
        for file in FileSystem.contents(of: packagesDirectory).sorted()
        where !referenced.contains(packagesDirectory.appendingPathComponent(file).path) {
            problems.append("packages/\(file): dangling, no manifest lists it")
        }
        return Verification(problems: problems, notes: notes, manifests: channels.count, packageFiles: referenced.count)
    }

    /// Checks a published manifest as clients see it: the checks of ``verify(trusting:threshold:)``
    /// on the manifest at `manifestURL` (declaring `channel`, when given), and every package
    /// file it lists downloaded through `transport` from where clients download it, up to its
    /// signed size, and hashed; nothing is written to disk.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` with no key; what `transport` throws
    ///   for the manifest; the problems found are returned, not thrown.
    public static func verifyPublished(
        _ manifestURL: URL,
        trusting keys: [PublicKey],
        threshold: Int = 1,
        channel: String? = nil,
        transport: any Transport,
        concurrency: Int = 4
    ) async throws -> Verification {
        let verifier = CryptoVerifier()
        let trusted = try trustTable(keys, verifier: verifier)
        let name = manifestURL.absoluteString
        let data = try await transport.fetchDocument(url: manifestURL, maxBytes: 8 << 20)
        var (body, problems) = checkManifest(
            data,
            name: name,
            trusted: trusted,
            threshold: threshold,
            verifier: verifier
        )
        var checked = 0
        if let body {
            if let channel, body.channel != channel {
                problems.append("\(name): declares channel '\(body.channel ?? "(none)")', not '\(channel)'")
            }
            var files: [(label: String, version: SignedManifestBody.Version, url: URL)] = []
            for package in body.packages {
                for version in package.versions {
                    let label = "\(package.id) \(version.version)"
                    guard let url = URL(string: version.url, relativeTo: manifestURL)?.absoluteURL else {
                        problems.append("\(label): '\(version.url)' is not a URL")
                        continue
                    }
                    files.append((label, version, url))
                }
            }
            let found = try await forEachConcurrently(files, limit: max(1, concurrency)) { file in
                await checkDownload(file.version, at: file.url, label: file.label, transport: transport)
            }
            problems += found.flatMap { $0 }
            checked = files.count
        }
        return Verification(problems: problems, notes: [], manifests: body == nil ? 0 : 1, packageFiles: checked)
    }

    /// The trusted keys by key id.
    static func trustTable(_ keys: [PublicKey], verifier: CryptoVerifier) throws -> [String: PublicKey] {
        guard !keys.isEmpty else { throw HotUpdateError(.invalidArgument, "give at least one trusted key") }
        var trusted: [String: PublicKey] = [:]
        for key in keys { trusted[try verifier.keyID(of: key)] = key }
        return trusted
    }

    /// The checks of one manifest's bytes that do not depend on where its files are:
    /// signatures (trusted and declared thresholds), expiry, releases listed.
    static func checkManifest(
        _ data: Data,
        name: String,
        trusted: [String: PublicKey],
        threshold: Int,
        verifier: CryptoVerifier
    ) -> (SignedManifestBody?, [String]) {
        var problems: [String] = []
        let body: SignedManifestBody
        do {
            guard let envelope = try SignedEnvelope.read(data) else { return (nil, ["\(name): not signed (schema 1)"]) }
            let release = try SignedManifestBody.decode(envelope.signed)
            for (keys, needed, whose) in [
                (trusted, threshold, "trusted"),
                (try release.keyTable(verifier: verifier), release.threshold, "declared"),
            ] {
                do {
                    try envelope.tally(keys: keys, verifier: verifier).require(needed, whose: whose)
                } catch let error as HotUpdateError {
                    problems.append("\(name): \(error.message)")
                }
            }
            if let rollout = envelope.rollout, let role = release.rolloutRole {
                do {
                    try rollout.tally(role: role, verifier: verifier).require(role.threshold, whose: "rollout role")
                } catch let error as HotUpdateError {
                    problems.append("\(name): the rollout part: \(error.message)")
                }
            }
            // The manifest clients act on: the rollout part's limits are checked here.
            body = try envelope.effectiveBody(verifier: verifier)
        } catch let error as HotUpdateError {
            return (nil, problems + ["\(name): \(error.message)"])
        } catch {
            return (nil, problems + ["\(name): \(error)"])
        }
        if body.expires <= Date() {
            problems.append("\(name): expired at \(SignedManifestBody.rfc3339(body.expires))")
        }
        do {
            try PathCollision.check(body.packages.map(\.id), caseSensitive: false, what: "the package ids")
        } catch let error as HotUpdateError {
            problems.append("\(name): \(error.message)")
        } catch {
            problems.append("\(name): \(error)")
        }
        for package in body.packages {
            for release in package.releases where package.entry(for: release) == nil {
                problems.append("\(name): \(package.id) releases \(release), which it does not list")
            }
        }
        return (body, problems)
    }

    /// Downloads one package file up to its signed size and compares size, SHA-256 and MD5.
    static func checkDownload(
        _ version: SignedManifestBody.Version,
        at url: URL,
        label: String,
        transport: any Transport
    ) async -> [String] {
        let verifier = CryptoVerifier()
        do {
            let response = try await transport.fetch(TransportRequest(url: url, maxBytes: version.size))
            guard response.isSuccess else {
                response.body.cancel()
                return ["\(label): \(url.absoluteString) answered HTTP \(response.statusCode)"]
            }
            let sha256 = try verifier.makeHasher(for: .sha256)
            let md5 = try verifier.makeHasher(for: .md5)
            var size: Int64 = 0
            for try await chunk in response.body {
                sha256.update(chunk)
                md5.update(chunk)
                size += Int64(chunk.count)
            }
            var problems: [String] = []
            if size != version.size {
                problems.append("\(label): \(url.absoluteString) has \(size) bytes, the manifest says \(version.size)")
            }
            let digest = sha256.finalize().hex
            if digest != version.sha256.lowercased() {
                problems.append(
                    "\(label): \(url.absoluteString) has SHA-256 \(digest), the manifest says \(version.sha256)"
                )
            }
            if let expected = version.md5, md5.finalize().hex != expected.lowercased() {
                problems.append("\(label): \(url.absoluteString) differs from the manifest's MD5")
            }
            return problems
        } catch let error as HotUpdateError where error.code == .byteLimitExceeded {
            return ["\(label): \(url.absoluteString) is longer than the manifest's \(version.size) bytes"]
        } catch {
            return ["\(label): cannot download \(url.absoluteString): \(error)"]
        }
    }

    /// The channel's timestamp: it names bytes the repository holds (the content-addressed
    /// copy, or the manifest), and clients would accept it over the release manifest in them.
    /// One naming an earlier manifest is noted, not a problem: clients see the current one
    /// once it is signed again. A manifest that declares a timestamp role needs one.
    static func checkTimestamp(
        files: RepositoryFiles,
        channel: String?,
        manifest: Data,
        verifier: CryptoVerifier,
        notes: inout [String]
    ) -> [String] {
        let name = files.timestampPath(channel: channel)
        let url = files.timestampURL(channel: channel)
        do {
            guard FileManager.default.fileExists(atPath: url.path) else {
                guard let envelope = try SignedEnvelope.read(manifest),
                    try SignedManifestBody.decode(envelope.signed).timestampRole != nil
                else { return [] }
                return ["\(name): missing, and \(files.manifestPath(channel: channel)) declares a timestamp role"]
            }
            let served = try ServedTimestamp(try Data(contentsOf: url))
            let named: Data
            var directory = url.deletingLastPathComponent()
            if let path = served.part.manifest.path {
                let target = URL(fileURLWithPath: path, relativeTo: url.deletingLastPathComponent()).standardizedFileURL
                guard FileManager.default.fileExists(atPath: target.path) else {
                    return ["\(name): names \(path), which the repository does not hold"]
                }
                named = try Data(contentsOf: target)
                directory = target.deletingLastPathComponent()
            } else {
                named = manifest
            }
            guard try served.part.names(named, verifier: verifier) else {
                return ["\(name): the manifest it names has other bytes than it says"]
            }
            let envelope = try SignedEnvelope.parse(named)
            let release = try SignedManifestBody.decode(envelope.signed)
            // A sharded manifest's top document: its shards, beside it, as clients fetch them.
            var shards: [String: Data]? = release.isSharded ? [:] : nil
            for reference in release.shards ?? [] {
                let shard = directory.appendingPathComponent(reference.path)
                guard FileManager.default.fileExists(atPath: shard.path) else {
                    return ["\(name): names a top document whose shard \(reference.path) the repository does not hold"]
                }
                let data = try Data(contentsOf: shard)
                try reference.check(data, verifier: verifier)
                shards?[reference.sha256] = data
            }
            try served.check(
                release: release,
                body: try envelope.effectiveBody(verifier: verifier, shards: shards),
                manifestSHA256: served.part.manifest.sha256,
                manifestLength: served.part.manifest.length,
                now: Date(),
                verifier: verifier
            )
            let current =
                files.isSharded(channel: channel) ? try Data(contentsOf: files.topURL(channel: channel)) : manifest
            // The manifest for clients that predate shards says what the top document says.
            if release.isSharded, named == current, let whole = try SignedEnvelope.read(manifest),
                try SignedManifestBody.decode(whole.signed) != envelope.releaseBody(verifier: verifier, shards: shards)
            {
                return ["\(name): the top document it names differs from \(files.manifestPath(channel: channel))"]
            }
            if named != current {
                notes.append(
                    "\(name): names manifest version \(served.part.manifest.version), not the current one; clients see that once the timestamp is signed again (hot timestamp)"
                )
            }
            return []
        } catch let error as HotUpdateError {
            return ["\(name): \(error.message)"]
        } catch {
            return ["\(name): \(error)"]
        }
    }

    static func check(
        _ version: SignedManifestBody.Version,
        at url: URL,
        label: String,
        verifier: CryptoVerifier
    )
        -> [String]
    {
        guard FileManager.default.fileExists(atPath: url.path) else { return ["\(label): \(version.url) is missing"] }
        var problems: [String] = []
        do {
            let size = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value
            if size != version.size {
                problems.append("\(label): size is \(size ?? -1), the manifest says \(version.size)")
            }
            let sha256 = try verifier.digest(ofFile: url, using: .sha256).hex
            if sha256 != version.sha256.lowercased() {
                problems.append("\(label): SHA-256 is \(sha256), the manifest says \(version.sha256)")
            }
            if let md5 = version.md5, try verifier.digest(ofFile: url, using: .md5).hex != md5.lowercased() {
                problems.append("\(label): MD5 differs from the manifest")
            }
        } catch {
            problems.append("\(label): cannot read \(version.url): \(error)")
        }
        return problems
    }
}
