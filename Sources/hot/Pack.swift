import ArgumentParser
import Foundation
import HotArchive
import HotCore
import HotStore
import HotVerify

/// `hot pack DIR --id ID --version V --repo REPO`
struct Pack: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Zip a directory into a repository and record it in the repository's manifest.json.",
        discussion: """
            The archive is written to REPO/packages/ID-VERSION.zip and the package's entry in
            REPO/manifest.json is added or replaced (size, sha256, md5), with a URL relative to
            the manifest, so the repository can be served from anywhere.
            """)

    @Argument(help: "The directory to pack.")
    var directory: String

    @Option(help: "The package id.")
    var id: String

    @Option(help: "The package version.")
    var version: String

    @Option(help: "The repository directory (created if missing).")
    var repo: String

    func run() async throws {
        try await runReportingErrors {
            let source = directoryURL(directory)
            guard FileSystem.isDirectory(source) else {
                throw HotUpdateError(.notFound, "not a directory", subject: source.path)
            }
            _ = try PackageDescriptor(
                id: id, version: version, url: URL(fileURLWithPath: "/"))  // validates id and version
            let repository = directoryURL(repo)
            let packages = repository.appendingPathComponent("packages", isDirectory: true)
            try FileSystem.createDirectory(packages)
            let archiveName = "\(id)-\(version).zip"
            let archive = packages.appendingPathComponent(archiveName)

            let summary = try ZipWriter.write(directory: source, to: archive, options: ZipWriter.Options())
            let verifier = CryptoVerifier()
            let sha256 = try verifier.digest(ofFile: archive, using: .sha256)
            let md5 = try verifier.digest(ofFile: archive, using: .md5)
            let size = try archive.resourceValues(forKeys: [.fileSizeKey]).fileSize ?? 0

            let manifestURL = repository.appendingPathComponent("manifest.json")
            var document = ManifestDocument()
            if FileManager.default.fileExists(atPath: manifestURL.path) {
                document = try ManifestDocument.decode(try Data(contentsOf: manifestURL))
            }
            document.upsert(
                ManifestDocument.Entry(
                    id: id, version: version, url: "packages/\(archiveName)", size: Int64(size),
                    sha256: sha256.hex, md5: md5.hex))
            try DurableFile.write(try document.encoded(), to: manifestURL)
            print("packed \(id) \(version): \(summary.fileCount) files, \(size) bytes, sha256 \(sha256.hex)")
        }
    }
}
