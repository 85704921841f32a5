import ArgumentParser
import Foundation
import HotArchive
import HotCore

/// `hot-bench extract --backend B ARCHIVE DEST`: one extraction in this process, so the
/// benchmark can time it and read its peak RSS as a child like any other tool. Prints the
/// nanoseconds the `extract` call itself took (without process start-up) on stdout.
struct Extract: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Extract one archive with one in-process backend (used by the benchmark).",
        shouldDisplay: false)

    enum Backend: String, ExpressibleByArgument, CaseIterable {
        case zip, libarchive
    }

    @Option(help: "zip (ZipUnarchiver) or libarchive (LibArchiveUnarchiver).")
    var backend: Backend

    @Argument(help: "The ZIP file.")
    var archive: String

    @Argument(help: "The destination directory (absent or empty).")
    var destination: String

    func run() async throws {
        let source = URL(fileURLWithPath: archive)
        let target = URL(fileURLWithPath: destination, isDirectory: true)
        let start = monotonicSeconds()
        do {
            switch backend {
            case .zip:
                _ = try await ZipUnarchiver().extract(source, to: target)
            case .libarchive:
                _ = try await LibArchiveUnarchiver().extract(source, to: target)
            }
            print(Int64((monotonicSeconds() - start) * 1e9))
        } catch let error as HotUpdateError {
            FileHandle.standardError.write(Data("hot-bench extract: \(error.detailedDescription())\n".utf8))
            throw ExitCode(1)
        } catch {
            FileHandle.standardError.write(Data("hot-bench extract: \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// `hot-bench pack DIR ARCHIVE`: one ZipWriter run in this process.
struct Pack: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Pack a directory with ZipWriter (used by the benchmark).", shouldDisplay: false)

    @Argument(help: "The directory to pack.")
    var directory: String

    @Argument(help: "The ZIP file to write.")
    var archive: String

    func run() async throws {
        do {
            try ZipWriter.write(
                directory: URL(fileURLWithPath: directory, isDirectory: true), to: URL(fileURLWithPath: archive))
        } catch let error as HotUpdateError {
            FileHandle.standardError.write(Data("hot-bench pack: \(error.detailedDescription())\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// `hot-bench idle`: starts and exits, to measure what process start-up alone costs.
struct Idle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start and exit (used by the benchmark to measure start-up).", shouldDisplay: false)

    func run() async throws {}
}
