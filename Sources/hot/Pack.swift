import ArgumentParser
import Foundation
import HotArchive
import HotCore
import HotManifest
import HotPublish
import HotStore
import HotVerify

/// `hot pack DIR --id ID --version V --repo REPO [--channel NAME] [--no-release]`
struct Pack: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Zip a directory into a repository, list it in a channel's manifest and release it.",
        discussion: """
            The archive is written to REPO/packages/ID-VERSION-SHA.zip, named by its content \
            (the first 12 hex digits of its SHA-256), so the file never changes and a CDN may \
            cache it forever; the manifest is the only file that changes. The version is listed \
            in the channel's manifest (size and sha256; md5 too with --md5) and released unless --no-release is \
            given. Delta packages against the last --deltas releases (5 by default) are written \
            beside it and listed with the version: clients holding one of those releases download \
            only the changed files, or zstd patches of them (made where hot links libzstd, the \
            package trait 'Zstd'; a hot without it says so once and stores changed files whole). \
            --delivery sets when clients download the package: launch (first, before use), \
            prefetch (the default, in the background) or on-demand (only once the app asks for \
            it; kept current from then on). The manifest is left unsigned: run `hot sign` \
            before publishing.
            """
    )

    @Argument(help: "The directory to pack.")
    var directory: String

    @Option(help: "The package id.")
    var id: String

    @Option(help: "The package version.")
    var version: String

    @OptionGroup var repository: RepositoryOptions

    @Option(help: "When clients download the package: launch, prefetch or on-demand; kept when omitted.")
    var delivery: DeliveryChoice?

    @Flag(help: "Only list the version; release it later with `hot release`.")
    var noRelease = false

    @Option(help: "Build delta packages against this many of the last releases (0 for none).")
    var deltas = 5

    @Flag(help: "Allow paths that differ only by case; clients on volumes that ignore case refuse the package.")
    var caseSensitiveOnly = false

    @Flag(help: "Also list the package's MD5, for clients that check nothing else (ours check the SHA-256 alone).")
    var md5 = false

    @Option(
        help:
            "Encrypt the package and its deltas; the password goes into the manifest: it guards the files from those without it."
    )
    var password: String?

    @Option(
        help:
            "The cipher with --password: aes256 (the default), aes192, aes128 or zipcrypto (weak: any unzip reads it)."
    )
    var encryption: EncryptionChoice?

    func validate() throws {
        if encryption != nil && password == nil {
            throw ValidationError("--encryption needs --password")
        }
        if password?.isEmpty == true { throw ValidationError("--password must not be empty") }
    }

    /// The writer's encryption setting, when --password is given.
    var zipEncryption: ZipWriter.Encryption? {
        password.map { ZipWriter.Encryption((encryption ?? .aes256).method, password: $0) }
    }

    func run() async throws {
        try await runReportingErrors {
            let source = directoryURL(directory)
            guard FileSystem.isDirectory(source) else {
                throw HotUpdateError(.notFound, "not a directory", subject: source.path)
            }
            // Validates the id and the version.
            _ = try PackageDescriptor(id: id, version: version, url: URL(fileURLWithPath: "/"))
            let files = repository.files
            // The package alone: in a sharded channel, its shard and the top document.
            var edit = try files.loadPackage(id, channel: repository.channel)
            // Names every client would refuse are refused here, before anything is written.
            try PublishedNames.checkPack(
                source: source,
                id: id,
                caseSensitive: caseSensitiveOnly,
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
                encryption: zipEncryption
            )
            let summary = try ZipWriter.write(directory: source, to: temporary, options: zipOptions)
            let sha256 = try CryptoVerifier().digest(ofFile: temporary, using: .sha256)
            let archive = files.packagesDirectory.appendingPathComponent(
                "\(id)-\(version)-\(sha256.hex.prefix(12)).zip"
            )
            if !FileManager.default.fileExists(atPath: archive.path) {
                try FileSystem.rename(temporary, to: archive)
            }
            var entry = try files.versionEntry(of: archive, version: version, channel: repository.channel, md5: md5)
            entry.unpackedSize = summary.uncompressedBytes
            entry.caseSensitive = caseSensitiveOnly ? true : nil

            entry.password = password
            if summary.uncompressedBytes > UpdaterConfiguration.defaultMaxPackageBytes {
                FileHandle.standardError.write(
                    Data(
                        ("hot: warning: \(id) \(version) unpacks to \(summary.uncompressedBytes) bytes, more than the "
                            + "\(UpdaterConfiguration.defaultMaxPackageBytes) a client accepts by default; its apps "
                            + "must raise UpdaterConfiguration.maxPackageBytes (hot sync --max-package-bytes)\n").utf8
                    )
                )
            }
            let deltaEntries = try await DeltaBuilder(
                files: files,
                channel: repository.channel,
                encryption: zipEncryption,
                report: { print($0) },
                note: printNote
            ).build(
                package: edit.package,
                id: id,
                target: entry,
                targetTree: source,
                count: deltas
            )
            try edit.edit { package in
                try package.addVersion(entry)
                if !deltaEntries.isEmpty { package.setDeltas(deltaEntries, of: version) }
                if !noRelease { package.release(version, rollout: nil) }
                if let delivery { package.setDelivery(delivery.mode) }
            }
            try repository.save(edit)
            print(
                "packed \(id) \(version): \(summary.fileCount) files, \(entry.size) bytes, \(archive.lastPathComponent)"
                    + (zipEncryption.map { ", encrypted (\($0.method))" } ?? "") + (noRelease ? "" : ", released")
            )
        }
    }
}

/// `--delivery`: the delivery modes a manifest names.
enum DeliveryChoice: String, ExpressibleByArgument, CaseIterable {
    case launch
    case prefetch
    case onDemand = "on-demand"

    var mode: DeliveryMode { DeliveryMode(rawValue: rawValue) }
}

/// `hot pack --encryption`: the ciphers ``ZipWriter`` writes.
enum EncryptionChoice: String, ExpressibleByArgument, CaseIterable {
    case aes256, aes192, aes128, zipcrypto

    var method: ZipWriter.Encryption.Method {
        switch self {
        case .aes256: .aes256
        case .aes192: .aes192
        case .aes128: .aes128
        case .zipcrypto: .zipCrypto
        }
    }
}
