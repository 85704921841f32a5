import Foundation
import HotArchive
import HotCore
import HotManifest
import HotVerify

/// Builds the delta packages of a newly packed version against the package's last releases.
package struct DeltaBuilder {
    package var files: RepositoryFiles
    package var channel: String?
    /// The new version's encryption: its deltas are encrypted alike, with its password.
    package var encryption: ZipWriter.Encryption? = nil
    /// Called with a line for each delta written (`delta ID A -> B: …`).
    package var report: (String) -> Void
    /// Called with a note: a base skipped, the build making no binary patches.
    package var note: (String) -> Void

    /// A builder for `channel` of `files`.
    package init(
        files: RepositoryFiles,
        channel: String?,
        encryption: ZipWriter.Encryption? = nil,
        report: @escaping (String) -> Void = { _ in },
        note: @escaping (String) -> Void = { _ in }
    ) {
        (self.files, self.channel, self.encryption, self.report, self.note) = (files, channel, encryption, report, note)
    }

    /// Said once, before the first delta, by a build that cannot make binary patches.
    package static let noPatchesNote =
        "hot: this build cannot make binary patches (they need libzstd's encoder: the package trait 'Zstd', "
        + "on by default off Apple platforms); its deltas hold each changed file whole"

    /// The delta writer's options: binary patches where libzstd's encoder is linked, none elsewhere
    /// (a patcher that cannot make patches would fail the delta).
    package static var deltaOptions: DeltaWriter.Options {
        DeltaWriter.Options(patcher: ZstdPatcher.canMakePatches ? ZstdPatcher() : nil)
    }

    /// ``deltaOptions``, encrypting like the new version.
    package var deltaOptions: DeltaWriter.Options {
        var options = Self.deltaOptions
        options.zip.encryption = encryption
        return options
    }

    /// Writes `packages/<id>-<base>-to-<version>-<sha>.delta` for each of the last `count`
    /// releases of `package` other than `target` whose archive is in the repository, and
    /// returns their manifest entries. A base that cannot be read is skipped with a note.
    package func build(
        package: SignedManifestBody.Package?,
        id: String,
        target: SignedManifestBody.Version,
        targetTree: URL,
        count: Int
    ) async throws -> [DeltaEntry] {
        guard count > 0, let package else { return [] }
        var bases: [SignedManifestBody.Version] = []
        for release in package.releases.reversed() where release != target.version {
            guard bases.count < count, !bases.contains(where: { $0.version == release }),
                let entry = package.entry(for: release)
            else { continue }
            bases.append(entry)
        }
        var entries: [DeltaEntry] = []
        let verifier = CryptoVerifier()
        var noted = false
        for base in bases {
            let archive = files.packagesDirectory.appendingPathComponent(
                URL(fileURLWithPath: base.url).lastPathComponent
            )
            guard FileManager.default.fileExists(atPath: archive.path) else {
                note("no delta from \(id) \(base.version): \(archive.lastPathComponent) is not in packages/")
                continue
            }
            let work = files.packagesDirectory.appendingPathComponent(".base-\(UUID().uuidString)", isDirectory: true)
            defer { try? FileSystem.remove(work) }
            var options = ExtractOptions()
            options.maxTotalBytes = Int64.max / 2
            options.password = base.password
            _ = try await ZipUnarchiver().extract(archive, to: work, options: options, progress: { _ in })
            let temporary = files.packagesDirectory.appendingPathComponent(".\(id)-\(UUID().uuidString).delta")
            defer { try? FileSystem.remove(temporary) }
            if !ZstdPatcher.canMakePatches, !noted {
                note(Self.noPatchesNote)
                noted = true
            }
            let summary = try DeltaWriter.write(
                packageID: id,
                base: DeltaWriter.Side(version: base.version, sha256: base.sha256, directory: work),
                target: DeltaWriter.Side(version: target.version, sha256: target.sha256, directory: targetTree),
                to: temporary,
                verifier: verifier,
                options: deltaOptions
            )
            guard summary.archiveBytes < target.size else {
                note("no delta from \(id) \(base.version): it would not be smaller than the package")
                continue
            }
            let sha256 = try verifier.digest(ofFile: temporary, using: .sha256)
            let name = "\(id)-\(base.version)-to-\(target.version)-\(sha256.hex.prefix(12)).delta"
            let destination = files.packagesDirectory.appendingPathComponent(name)
            if !FileManager.default.fileExists(atPath: destination.path) {
                try FileSystem.rename(temporary, to: destination)
            }
            entries.append(
                DeltaEntry(
                    from: base.version,
                    fromSHA256: base.sha256,
                    url: files.packageReference(name, channel: channel),
                    size: summary.archiveBytes,
                    sha256: sha256.hex
                )
            )
            report(
                "delta \(id) \(base.version) -> \(target.version): \(summary.archiveBytes) bytes, "
                    + "\(summary.wholeFiles) whole, \(summary.patchedFiles) patched, \(summary.reusedFiles) reused, "
                    + "\(summary.removedPaths) removed"
            )
        }
        return entries
    }
}

extension SignedManifestBody.Package {
    /// Sets the deltas of a listed version.
    package mutating func setDeltas(_ deltas: [DeltaEntry], of version: String) {
        guard let index = versions.lastIndex(where: { $0.version == version }) else { return }
        versions[index].deltas = deltas.isEmpty ? nil : deltas
    }
}
