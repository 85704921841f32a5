import Foundation
import HotCore

/// The shards of the last sharded manifest a ``SignedManifestSource`` accepted, kept under the
/// store root (`shards.kept`) so that the next change downloads only the shards whose hash
/// changed: a change to one package of ten thousand costs the top document and one shard.
///
/// The file is a sequence of records, each a line `<sha256> <length>` and then that many bytes
/// and a newline. A record whose bytes do not match its SHA-256 is ignored (the shard is
/// downloaded again), and every shard used is checked again against the top document that
/// names it. The store writes the file, under its lock, when the set of shards changes.
enum KeptShards {
    /// The kept shards by SHA-256; empty when there are none or the file cannot be read.
    static func load(root: URL, verifier: any Verifier) -> [String: Data] {
        guard let data = try? StoreStateFile.keptShards.read(root: root) else { return [:] }
        var shards: [String: Data] = [:]
        var index = data.startIndex
        while index < data.endIndex {
            guard let newline = data[index...].firstIndex(of: 0x0A),
                let header = String(data: data[index..<newline], encoding: .utf8)
            else { break }
            let fields = header.split(separator: " ")
            guard fields.count == 2, let length = Int(fields[1]), length >= 0,
                data.distance(from: newline, to: data.endIndex) > length
            else { break }
            let start = data.index(after: newline)
            let end = data.index(start, offsetBy: length)
            let bytes = Data(data[start..<end])
            if (try? verifier.digest(of: bytes, using: .sha256).hex) == String(fields[0]) {
                shards[String(fields[0])] = bytes
            }
            index = data.index(after: end)
        }
        return shards
    }

    /// The file's content for `shards` (SHA-256 → bytes), in the order of their hashes.
    static func encoded(_ shards: [String: Data]) -> Data {
        var data = Data()
        for (sha256, bytes) in shards.sorted(by: { $0.key < $1.key }) {
            data.append(Data("\(sha256) \(bytes.count)\n".utf8))
            data.append(bytes)
            data.append(0x0A)
        }
        return data
    }
}
