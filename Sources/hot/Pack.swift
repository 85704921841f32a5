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
            let packed = try await repository.library.pack(
                directoryURL(directory),
                id: id,
                version: version,
                channel: repository.channel,
                options: Repository.PackOptions(
                    release: !noRelease,
                    deltas: deltas,
                    delivery: delivery?.mode,
                    caseSensitive: caseSensitiveOnly,
                    md5: md5,
                    encryption: zipEncryption
                )
            )
            for note in packed.notes { printNote(note) }
            for line in packed.deltas { print(line) }
            printNote("\(packed.unsignedPath) changed; sign it with `hot sign` before publishing")
            print(packed.summary)
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
