import ArgumentParser
import Foundation
import HotCore
import HotManifest
import HotVerify

/// `hot verify --repo DIR --trust FILE…`
struct Verify: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Check a repository before publishing it: signatures, package sizes and digests, dangling files.",
        discussion: """
            Every manifest (manifest.json and channels/*/manifest.json) must be signed by \
            --threshold of the --trust keys and by its own declared threshold, must not be \
            expired, and must release only versions it lists. Every listed package file must \
            exist with the listed size, SHA-256 and MD5, and every file in packages/ must be \
            listed by some manifest. Prints each problem and exits 1 when there is any.
            """)

    @Option(help: "The repository directory.") var repo: String

    @Option(help: "A trusted public key (repeatable).") var trust: [String] = []

    @Option(help: "How many of the --trust keys must sign each manifest.") var threshold = 1

    func run() async throws {
        try await runReportingErrors {
            guard !trust.isEmpty else { throw ValidationError("give at least one --trust key") }
            let verifier = CryptoVerifier()
            var trusted: [String: PublicKey] = [:]
            for key in try readPublicKeys(trust) { trusted[try verifier.keyID(of: key)] = key }
            let files = RepositoryFiles(root: directoryURL(repo))
            let channels = files.channels()
            var problems: [String] = []
            var referenced = Set<String>()
            if channels.isEmpty { problems.append("no manifest.json and no channels/*/manifest.json") }

            for channel in channels {
                let name = files.manifestPath(channel: channel)
                let body: SignedManifestBody
                do {
                    let data = try files.manifestData(channel: channel)
                    guard SignedEnvelope.isEnvelope(data) else {
                        problems.append("\(name): not signed (schema 1)")
                        continue
                    }
                    let envelope = try SignedEnvelope.parse(data)
                    body = try SignedManifestBody.decode(envelope.signed)
                    for (keys, needed, whose) in [
                        (trusted, threshold, "trusted"), (try body.keyTable(verifier: verifier), body.threshold, "declared"),
                    ] {
                        do {
                            try envelope.tally(keys: keys, verifier: verifier).require(needed, whose: whose)
                        } catch let error as HotUpdateError {
                            problems.append("\(name): \(error.message)")
                        }
                    }
                } catch let error as HotUpdateError {
                    problems.append("\(name): \(error.message)")
                    continue
                }
                if body.channel != channel {
                    problems.append("\(name): declares channel '\(body.channel ?? "(none)")'")
                }
                if body.expires <= Date() {
                    problems.append("\(name): expired at \(SignedManifestBody.rfc3339(body.expires))")
                }
                let manifestURL = files.manifestURL(channel: channel)
                for package in body.packages {
                    for release in package.releases where package.entry(for: release) == nil {
                        problems.append("\(name): \(package.id) releases \(release), which it does not list")
                    }
                    for version in package.versions {
                        let label = "\(name): \(package.id) \(version.version)"
                        guard let url = URL(string: version.url, relativeTo: manifestURL)?.standardizedFileURL,
                            url.isFileURL
                        else {
                            continue  // an absolute URL elsewhere: not this repository's file
                        }
                        referenced.insert(url.path)
                        problems += check(version, at: url, label: label, verifier: verifier)
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
    }

    private func check(_ version: SignedManifestBody.Version, at url: URL, label: String, verifier: CryptoVerifier)
        -> [String]
    {
        guard FileManager.default.fileExists(atPath: url.path) else { return ["\(label): \(version.url) is missing"] }
        var problems: [String] = []
        do {
            let size = (try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value
            if size != version.size { problems.append("\(label): size is \(size ?? -1), the manifest says \(version.size)") }
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
