import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotPublish
import HotVerify

/// `hot verify --repo DIR --trust FILE…` or `hot verify --url URL --trust FILE…`
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract:
            "Check a repository: signatures, expiry, package sizes and digests; before publishing (--repo) or as clients see it (--url).",
        discussion: """
            Every manifest (manifest.json and channels/*/manifest.json) must be signed by \
            --threshold of the --trust keys and by its own declared threshold, must not be \
            expired, and must release only versions it lists. Every listed package file must \
            exist with the listed size, SHA-256 and MD5, hold no two paths that are one name on \
            some file system (Unicode normalisation, case), and every file in packages/ must be \
            listed by some manifest. Each channel's timestamp (timestamp.json) must name bytes \
            the repository holds and be one clients accept; a manifest that declares a \
            timestamp role needs one. Prints each problem and exits 1 when there is any.

            With --url, the manifest at that URL is checked the same way and every package \
            file it lists is downloaded from where clients download it (its URL relative to \
            the manifest's), up to its signed size, and hashed; nothing is written to disk.
            """
    )

    @Option(help: "The repository directory.") var repo: String?

    @Option(help: "A published manifest's URL (http, https or file), checked as clients see it.") var url: String?

    @Option(help: "With --url: the channel the manifest must declare.") var channel: String?

    @Option(help: "A trusted public key (repeatable).") var trust: [String] = []

    @Option(help: "How many of the --trust keys must sign each manifest.") var threshold = 1

    @Option(help: "With --url: how many package files are downloaded at once.") var concurrency = 4

    @OptionGroup(title: "TLS (with --url)") var tlsOptions: TLSOptions

    func validate() throws {
        guard (repo == nil) != (url == nil) else { throw ValidationError("give either --repo or --url") }
        guard concurrency >= 1 else { throw ValidationError("--concurrency must be 1 or more") }
    }

    /// The checks of one manifest's bytes that do not depend on where its files are:
    /// signatures (trusted and declared thresholds), expiry, releases listed.
    private func checkManifest(
        _ data: Data,
        name: String,
        trusted: [String: PublicKey],
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

    private func trustedKeys(_ verifier: CryptoVerifier) throws -> [String: PublicKey] {
        guard !trust.isEmpty else { throw ValidationError("give at least one --trust key") }
        var trusted: [String: PublicKey] = [:]
        for key in try readPublicKeys(trust) { trusted[try verifier.keyID(of: key)] = key }
        return trusted
    }

    func run() async throws {
        try await runReportingErrors {
            if let url {
                try await verifyPublished(try parseLocation(url))
            } else {
                try await verifyRepository(directoryURL(repo ?? "."))
            }
        }
    }

    /// `--url`: the manifest and every package as a client downloads them.
    private func verifyPublished(_ manifestURL: URL) async throws {
        let verifier = CryptoVerifier()
        let trusted = try trustedKeys(verifier)
        let transport = try TransportKind.defaultKind(for: manifestURL).make(trust: tlsOptions.trust())
        let name = manifestURL.absoluteString
        let data = try await transport.fetchDocument(url: manifestURL, maxBytes: 8 << 20)
        var (body, problems) = checkManifest(data, name: name, trusted: trusted, verifier: verifier)
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
            let found = try await forEachConcurrently(files, limit: concurrency) { file in
                await Self.checkDownload(file.version, at: file.url, label: file.label, transport: transport)
            }
            problems += found.flatMap { $0 }
            checked = files.count
        }
        for problem in problems { print(problem) }
        guard problems.isEmpty else {
            printError("\(problems.count) problem(s) in \(name)")
            throw ExitCode(1)
        }
        print("ok: \(name), \(checked) package file(s) reachable with their signed size and digests")
    }

    /// Downloads one package file up to its signed size and compares size, SHA-256 and MD5.
    private static func checkDownload(
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

    /// `--repo`: the repository on disk before publishing.
    private func verifyRepository(_ root: URL) async throws {
        let verifier = CryptoVerifier()
        let trusted = try trustedKeys(verifier)
        let files = RepositoryFiles(root: root)
        let channels = files.channels()
        var problems: [String] = []
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
            let (checkedBody, manifestProblems) = checkManifest(data, name: name, trusted: trusted, verifier: verifier)
            problems += manifestProblems
            guard let body = checkedBody else { continue }
            if body.channel != channel {
                problems.append("\(name): declares channel '\(body.channel ?? "(none)")'")
            }
            problems += checkTimestamp(files: files, channel: channel, manifest: data, verifier: verifier)
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
                    let found = check(version, at: url, label: label, verifier: verifier)
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
        for problem in problems { print(problem) }
        guard problems.isEmpty else {
            printError("\(problems.count) problem(s) in \(files.root.path)")
            throw ExitCode(1)
        }
        print("ok: \(channels.count) manifest(s), \(referenced.count) package file(s)")
    }

    /// The channel's timestamp: it names bytes the repository holds (the content-addressed
    /// copy, or the manifest), and clients would accept it over the release manifest in them.
    /// One naming an earlier manifest is noted, not a problem: clients see the current one
    /// once it is signed again. A manifest that declares a timestamp role needs one.
    private func checkTimestamp(
        files: RepositoryFiles,
        channel: String?,
        manifest: Data,
        verifier: CryptoVerifier
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
                print(
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

    private func check(
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
