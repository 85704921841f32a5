import Foundation
import Testing

/// A fresh temporary directory for one test, removed by ``remove()``.
struct Scratch {
    let url: URL

    init() throws {
        url = FileManager.default.temporaryDirectory
            .appendingPathComponent("hotarchive-tests-\(UUID().uuidString)", isDirectory: true)
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    }

    /// A path inside the directory.
    func path(_ relative: String) -> URL { url.appendingPathComponent(relative) }

    /// Removes the directory (making everything writable first).
    func remove() {
        _ = try? Tool.run("/bin/chmod", ["-R", "u+rwx", url.path])
        try? FileManager.default.removeItem(at: url)
    }

    /// Names in the directory itself (not recursive), sorted.
    func listing() -> [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: url.path)) ?? []).sorted()
    }
}

/// Runs external tools (zip, unzip, bsdtar, python3).
enum Tool {
    struct Output {
        var status: Int32
        var stdout: String
        var stderr: String
    }

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    /// Runs `executable` (a path, or a name looked up in PATH) with `arguments`.
    @discardableResult
    static func run(_ executable: String, _ arguments: [String], in directory: URL? = nil, stdin: Data? = nil) throws
        -> Output
    {
        let process = Process()
        if executable.hasPrefix("/") {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        } else {
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = [executable] + arguments
        }
        if let directory { process.currentDirectoryURL = directory }
        let out = Pipe()
        let err = Pipe()
        process.standardOutput = out
        process.standardError = err
        let input = Pipe()
        process.standardInput = input
        try process.run()
        if let stdin { input.fileHandleForWriting.write(stdin) }
        try? input.fileHandleForWriting.close()
        // Read both pipes before waiting so a chatty tool cannot block on a full pipe.
        let errData = ThreadedRead(err.fileHandleForReading)
        let outData = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return Output(
            status: process.terminationStatus, stdout: String(decoding: outData, as: UTF8.self),
            stderr: String(decoding: errData.wait(), as: UTF8.self))
    }

    /// Runs a tool and fails when it exits non-zero.
    @discardableResult
    static func check(_ executable: String, _ arguments: [String], in directory: URL? = nil) throws -> Output {
        let output = try run(executable, arguments, in: directory)
        guard output.status == 0 else {
            throw Failure(description: "\(executable) \(arguments) exited \(output.status): \(output.stderr)")
        }
        return output
    }

    /// Runs a python3 script (with `zipcraft` importable) in `directory`.
    @discardableResult
    static func python(_ script: String, in directory: URL) throws -> Output {
        try ZipCraft.install(in: directory)
        let file = directory.appendingPathComponent("script-\(UUID().uuidString).py")
        try script.write(to: file, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: file) }
        return try check("python3", [file.path], in: directory)
    }
}

/// Reads a pipe to its end on another thread.
private final class ThreadedRead: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var data = Data()
    init(_ handle: FileHandle) {
        Thread {
            self.data = handle.readDataToEndOfFile()
            self.done.signal()
        }.start()
    }
    func wait() -> Data {
        done.wait()
        return data
    }
}
