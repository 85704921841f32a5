import Foundation
import ZIPFoundation

// `hot-bench-zipfoundation ARCHIVE DEST`: one `FileManager.unzipItem(at:to:)`, timed by hot-bench
// as a child process; prints the nanoseconds the call itself took on stdout. It is its own executable because ZIPFoundation's zlib module map and
// HotArchive's both declare a module named `CHotZlib`, and one target cannot see both.
let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: hot-bench-zipfoundation ARCHIVE DEST\n".utf8))
    exit(2)
}
let start = DispatchTime.now().uptimeNanoseconds
do {
    try FileManager.default.unzipItem(
        at: URL(fileURLWithPath: arguments[1]),
        to: URL(fileURLWithPath: arguments[2], isDirectory: true)
    )
    print(DispatchTime.now().uptimeNanoseconds - start)
} catch {
    FileHandle.standardError.write(Data("hot-bench-zipfoundation: \(error)\n".utf8))
    exit(1)
}
