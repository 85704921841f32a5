import Foundation
import HotAssets
import HotCore
import HotStore

/// The name index's invariant after any run, however it ended: when the store's current
/// generation has an index, it opens (header, generation, block table) and every block passes its checksum, names exactly the
/// packages that resolve (active, enabled, undamaged, newest first), and every file it names
/// is a regular file of that package's active version. A generation without an index is
/// allowed (names then resolve through the file lists); an index that lies is not.
enum NameIndexInvariant {
    static func problems(root: URL) async -> [String] {
        let snapshot: StoreSnapshot
        do {
            snapshot = try await FileMetadataStore(root: root).load()
        } catch {
            return ["the name index check cannot read the store: \(error)"]
        }
        let layout = StoreLayout(root: root)
        let index: NameIndex
        do {
            index = try NameIndex(layout: layout, generation: snapshot.generation)
        } catch let error as HotUpdateError where error.code == .notFound {
            return []
        } catch {
            return ["the name index of generation \(snapshot.generation) does not open: \(error)"]
        }
        var problems: [String] = []
        let active = snapshot.packages.values.filter {
            $0.active != nil && ![.disabled, .fileMissing, .digestMismatch].contains($0.state)
        }
        var indexed: [String] = []
        for number in 0..<index.packageCount {
            let package = index.package(number)
            indexed.append(package.id)
            guard let record = snapshot.packages[package.id], let version = record.active,
                version.path == package.path, version.version == package.version
            else {
                problems.append(
                    "the name index names \(package.id) \(package.version) at \(package.path), not the active version"
                )
                continue
            }
        }
        if Set(indexed) != Set(active.map(\.id)) {
            problems.append("the name index holds \(indexed.sorted()), the store resolves \(active.map(\.id).sorted())")
        }
        let files: [NameIndex.File]
        do {
            files = try index.allFiles()  // every block checked first
        } catch {
            return problems + ["the name index of generation \(snapshot.generation) fails its checksums: \(error)"]
        }
        for file in files {
            let package = index.package(file.package)
            let path = root.appendingPathComponent(package.path).appendingPathComponent(file.path).path
            var info = stat()
            if lstat(path, &info) != 0 || (info.st_mode & S_IFMT) != S_IFREG || Int64(info.st_size) != file.size {
                problems.append("the name index resolves to \(package.path)/\(file.path), which is not that file")
                if problems.count > 5 { break }
            }
        }
        return problems
    }
}
