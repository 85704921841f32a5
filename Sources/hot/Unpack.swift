import ArgumentParser
import Foundation
import HotCore

/// `hot unpack ARCHIVE DEST`
struct Unpack: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Unpack one archive, all or nothing: on failure the destination is left as it was."
    )

    @Argument(help: "The archive.")
    var archive: String

    @Argument(help: "The destination directory; must not exist or be empty.")
    var destination: String

    @Option(help: "The unarchiver.")
    var backend: UnarchiverKind = .zip

    @Option(help: "The most bytes the archive may inflate to.")
    var maxBytes: Int64?

    @Option(help: "The password of an encrypted archive.")
    var password: String?

    func run() async throws {
        try await runReportingErrors {
            var options = ExtractOptions()
            if let maxBytes {
                guard maxBytes > 0 else { throw ValidationError("--max-bytes must be positive") }
                options.maxTotalBytes = maxBytes
            }
            options.password = password
            let report = try await backend.make().extract(
                URL(fileURLWithPath: archive),
                to: directoryURL(destination),
                options: options,
                progress: nil
            )
            print(
                "unpacked \(report.files.count) files, \(report.directories.count) directories, \(report.totalBytes) bytes"
            )
        }
    }
}
