import Foundation
import HotTesting

/// The package's source directory: the README and the DocC catalogs the snippets come from.
let packageDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

/// A scratch directory of its own, removed by the system's temporary cleanup.
func makeTemporaryDirectory(_ label: String) throws -> URL {
    try ScratchDirectory.make("hot-\(label)")
}
