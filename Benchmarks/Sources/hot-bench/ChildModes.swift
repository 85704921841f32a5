import ArgumentParser
import Foundation
import HotArchive
import HotCore
import HotVerify

/// `hot-bench extract --backend B ARCHIVE DEST`: one extraction in this process, so the
/// benchmark can time it and read its peak RSS as a child like any other tool. Prints the
/// nanoseconds the `extract` call itself took (without process start-up) on stdout.
struct Extract: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Extract one archive with one in-process backend (used by the benchmark).",
        shouldDisplay: false
    )

    enum Backend: String, ExpressibleByArgument, CaseIterable {
        case zip, libarchive
    }

    @Option(help: "zip (ZipUnarchiver) or libarchive (LibArchiveUnarchiver).")
    var backend: Backend

    @Argument(help: "The ZIP file.")
    var archive: String

    @Argument(help: "The destination directory (absent or empty).")
    var destination: String

    @Flag(help: "Only list the entries (the checks that precede extraction) and print how long that took.")
    var listOnly = false

    @Option(help: "The password of an encrypted archive.")
    var password: String?

    func run() async throws {
        let source = URL(fileURLWithPath: archive)
        let target = URL(fileURLWithPath: destination, isDirectory: true)
        let start = monotonicSeconds()
        do {
            if listOnly {
                switch backend {
                case .zip: _ = try await ZipUnarchiver().entries(of: source, options: ExtractOptions())
                case .libarchive: _ = try await LibArchiveUnarchiver().entries(of: source, options: ExtractOptions())
                }
                print(Int64((monotonicSeconds() - start) * 1e9))
                return
            }
            let options = ExtractOptions(password: password)
            switch backend {
            case .zip:
                _ = try await ZipUnarchiver().extract(source, to: target, options: options)
            case .libarchive:
                _ = try await LibArchiveUnarchiver().extract(source, to: target, options: options)
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
        abstract: "Pack a directory with ZipWriter (used by the benchmark).",
        shouldDisplay: false
    )

    @Argument(help: "The directory to pack.")
    var directory: String

    @Argument(help: "The ZIP file to write.")
    var archive: String

    func run() async throws {
        do {
            try ZipWriter.write(
                directory: URL(fileURLWithPath: directory, isDirectory: true),
                to: URL(fileURLWithPath: archive)
            )
        } catch let error as HotUpdateError {
            FileHandle.standardError.write(Data("hot-bench pack: \(error.detailedDescription())\n".utf8))
            throw ExitCode(1)
        }
    }
}

/// `hot-bench idle`: starts and exits, to measure what process start-up alone costs.
struct Idle: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Start and exit (used by the benchmark to measure start-up).",
        shouldDisplay: false
    )

    func run() async throws {}
}

/// `hot-bench corpus --size S DIR [--archive ZIP]`: writes one corpus (and optionally its
/// ZipWriter archive) and keeps it, for profiling a backend by hand.
struct MakeCorpus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "corpus",
        abstract: "Write a benchmark corpus to a directory and keep it.",
        shouldDisplay: false
    )

    @Option(help: "small or large.")
    var size: String = "small"

    @Option(help: "Also pack the corpus with ZipWriter into this file.")
    var archive: String?

    @Argument(help: "The directory to create (it must not exist).")
    var directory: String

    func run() async throws {
        guard let spec = CorpusSpec.all.first(where: { $0.name == size }) else {
            throw ValidationError("unknown size '\(size)' (use small, large)")
        }
        guard !FileManager.default.fileExists(atPath: directory) else {
            throw ValidationError("'\(directory)' exists already")
        }
        do {
            let root = URL(fileURLWithPath: directory, isDirectory: true)
            let corpus = try Corpus.generate(spec, at: root)
            print("\(corpus.files.count) files, \(corpus.totalBytes) bytes, fnv64 \(corpus.fingerprint)")
            if let archive {
                // As hot pack packs: each file's SHA-256 recorded.
                let options = ZipWriter.Options(fileHasher: { try CryptoVerifier().makeHasher(for: .sha256) })
                try ZipWriter.write(directory: root, to: URL(fileURLWithPath: archive), options: options)
            }
        } catch let error as HotUpdateError {
            FileHandle.standardError.write(Data("hot-bench corpus: \(error.detailedDescription())\n".utf8))
            throw ExitCode(1)
        }
    }
}
