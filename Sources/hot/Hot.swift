import ArgumentParser
import Foundation
import HotCore

/// `hot`: the publisher's and operator's tool.
@main
struct Hot: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hot",
        abstract: "Publish, install and inspect HotUpdate packages.",
        subcommands: [
            Keygen.self, Pack.self, Release.self, Rollback.self, Rollout.self, Disable.self, Enable.self, Sign.self,
            Timestamp.self, Shard.self,
            Verify.self,
            Sync.self, Install.self, Status.self, Resolve.self, Unpack.self, Delete.self, GarbageCollect.self,
            Repair.self,
            Unblock.self, ServeWeb.self,
        ] + publishing
    )

    /// `hot publish` speaks S3 through libcurl, where libcurl is linked.
    #if Curl && canImport(CHotCurl)
    static let publishing: [any ParsableCommand.Type] = [Publish.self, Pull.self]
    #else
    static let publishing: [any ParsableCommand.Type] = []
    #endif
}

/// Runs a command body, turning any failure into one line on stderr and exit code 1.
func runReportingErrors(_ body: () async throws -> Void) async throws {
    do {
        try await body()
    } catch let exit as ExitCode {
        throw exit
    } catch let error as HotUpdateError {
        printError(error.description)
        throw ExitCode(1)
    } catch {
        printError(String(describing: error))
        throw ExitCode(1)
    }
}

/// Prints `hot: error: message` on stderr, on one line.
func printError(_ message: String) {
    let line = "hot: error: " + message.replacingOccurrences(of: "\n", with: " ") + "\n"
    FileHandle.standardError.write(Data(line.utf8))
}

/// Prints a line on stderr (progress and notes that are not the command's output).
func printNote(_ message: String) {
    FileHandle.standardError.write(Data((message + "\n").utf8))
}

/// Turns a command-line path or URL into a URL: `http(s)://` and `file://` as given,
/// anything else as a file path relative to the current directory.
func parseLocation(_ text: String) throws -> URL {
    if let url = URL(string: text), let scheme = url.scheme?.lowercased(),
        ["http", "https", "file"].contains(scheme)
    {
        return url
    }
    guard !text.isEmpty else { throw ValidationError("an empty path is not a location") }
    return URL(fileURLWithPath: text).standardizedFileURL
}

/// A directory path from the command line.
func directoryURL(_ path: String) -> URL {
    URL(fileURLWithPath: path, isDirectory: true).standardizedFileURL
}

/// One line on stdout, written whole (uploads finish on several threads).
@Sendable func emit(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}
