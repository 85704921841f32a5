import CHotXattr
import Foundation
import Logging

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The content-addressed half of a store: every installed file once under
/// `objects/<2 hex>/<sha256>`, read-only, hard-linked into the installed trees.
///
/// Which objects are garbage is decided by the link count the kernel keeps: an object whose
/// only name is its `objects/` entry (link count 1) is linked by no installed tree. The
/// count is updated atomically with every link and unlink, so it is exact after a crash at
/// any point, with no reference table that could be left stale; a reference scan would
/// have to read every file list and would miss a tree moved into place but not yet
/// recorded. Every call here blocks: the engine runs them through ``FileSystem/offload(_:)``
/// and only from its serial store queue, so linking and freeing never race.
struct ObjectStore: Sendable {
    /// What a pass freed.
    struct Freed: Sendable, Hashable {
        var objects = 0
        var bytes: Int64 = 0
        mutating func add(_ other: Freed) {
            objects += other.objects
            bytes += other.bytes
        }
    }

    let layout: StoreLayout
    /// Where an object found to lie about its content is reported.
    var logger = Logger(label: "HotUpdate", factory: { _ in SwiftLogNoOpLogHandler() })

    /// Makes every file of a staged tree an object: a file whose content is new becomes the
    /// object itself (linked under `objects/`, made read-only); a file whose object exists
    /// is replaced in the tree by a link to it.
    ///
    /// - Parameters:
    ///   - tree: The unpacked tree, still in staging.
    ///   - files: Its regular files with their SHA-256, as hashed while unpacking.
    ///   - distrustExisting: Hash existing objects before reusing them (a repair does, since
    ///     the object may be what was damaged); otherwise an object of the right size is trusted,
    ///     unless another package's claim made it (below).
    ///   - claimedBy: The package whose `files` carry the SHA-256s its archive records, taken
    ///     unhashed (``ExtractOptions/trustsRecordedDigests``); nil when every file was hashed
    ///     here. A file taken on a claim is marked with the package (an extended attribute,
    ///     set before it is linked, so an object never exists unmarked) and keeps the mark as
    ///     an object. An object marked by another package, or reused by a package whose files
    ///     were hashed, is hashed first: if it matches, its mark goes; if not, the new file
    ///     takes its place and the lie is logged. So a package's claim decides the content of
    ///     its own files only, never another's. A claimed file whose object already exists
    ///     is hashed before it is linked (only then: new content is linked unhashed); when
    ///     its bytes are not what the archive records, they become an object of their own,
    ///     named by their SHA-256, the file list records that, and the lie is logged. Where
    ///     the file system keeps no extended attributes, a claimed file is hashed before it
    ///     becomes an object, and a package whose file does not match its claim is refused.
    ///   - verifier: Hashes objects when `distrustExisting` is set or a claim is checked.
    /// - Returns: The files as stored, and how many stay plain copies in the tree because
    ///   the file system would not link them (no hard links on it, or an object at its link
    ///   limit): those are not shared, and a repair re-downloads rather than restores them.
    /// - Throws: ``HotUpdateError/Code/fileSystem`` naming the file;
    ///   ``HotUpdateError/Code/corruptArchive`` when a claimed file that could not be marked
    ///   does not hash to its claim.
    /// What ``adopt(tree:files:distrustExisting:claimedBy:verifier:)`` did.
    struct Adoption: Sendable {
        /// The files as they are now stored: a file whose recorded SHA-256 was false carries
        /// the SHA-256 of its own bytes, the name of the object that holds them.
        var files: [FileList.Entry]
        /// How many files stay plain copies in the tree (see below).
        var copies = 0
    }

    func adopt(
        tree: URL,
        files: [FileList.Entry],
        distrustExisting: Bool,
        claimedBy: String? = nil,
        verifier: any Verifier
    ) throws -> Adoption {
        var adoption = Adoption(files: files)
        var fanouts = Set<String>()
        // Plain paths: building a URL per file cost more than the system calls it leads to.
        let treePath = tree.path
        let objectsPath = layout.objectsDirectory.path
        func pathOfObject(_ sha256: String) throws -> String {
            let fanout = String(sha256.prefix(2))
            if fanouts.insert(fanout).inserted {
                try FileSystem.createDirectory(URL(fileURLWithPath: objectsPath + "/" + fanout, isDirectory: true))
            }
            return objectsPath + "/" + fanout + "/" + sha256
        }
        for index in files.indices {
            var file = files[index]
            let stagedPath = treePath + "/" + file.path
            var objectPath = try pathOfObject(file.sha256)
            if let claimedBy { try mark(stagedPath, claimedBy: claimedBy, for: file, verifier) }
            // The new content's usual case: no object yet, so link first and look only when one is there.
            if posixLink(stagedPath, objectPath) == 0 {
                Self.seal(objectPath)
                continue
            }
            var code = errno
            var claim = claimedBy
            if code == EEXIST, let claimedBy {
                // A recorded digest would adopt an existing object: the entry's own bytes decide,
                // so a tree always equals its archive, whatever was installed before it.
                let actual = try verifier.digest(ofFile: URL(fileURLWithPath: stagedPath), using: .sha256).hex
                ObjectClaim.clear(stagedPath)
                claim = nil
                if actual != file.sha256 {
                    logger.warning(
                        "the archive records a SHA-256 its file does not have: the file's own bytes are kept",
                        metadata: [
                            "package": "\(claimedBy)", "path": "\(file.path)", "recorded": "\(file.sha256)",
                            "actual": "\(actual)",
                        ]
                    )
                    file.sha256 = actual
                    adoption.files[index] = file
                    objectPath = try pathOfObject(actual)
                    if posixLink(stagedPath, objectPath) == 0 {
                        Self.seal(objectPath)
                        continue
                    }
                    code = errno
                }
            }
            if code == EEXIST {
                let object = URL(fileURLWithPath: objectPath, isDirectory: false)
                if let existing = FileInfo(path: objectPath),
                    !isUsable(existing, object, for: file, hashing: distrustExisting, claimedBy: claim, verifier)
                {
                    try unlinkFile(object)
                    if posixLink(stagedPath, objectPath) == 0 {
                        Self.seal(objectPath)
                        continue
                    }
                    code = errno
                }
            }
            if Self.linkUnsupported(code) {
                Self.pin(stagedPath)
                adoption.copies += 1
                continue
            }
            guard code == EEXIST else {
                throw posixError(code, "cannot store \(file.path) as object \(file.sha256)")
            }
            let object = URL(fileURLWithPath: objectPath, isDirectory: false)
            let staged = URL(fileURLWithPath: stagedPath, isDirectory: false)
            let linked = try link(object, replacing: staged)
            if linked == 0 { continue }
            guard Self.linkUnsupported(linked) else {
                throw posixError(linked, "cannot link object \(file.sha256) to \(staged.path)")
            }
            Self.pin(stagedPath)
            adoption.copies += 1
        }
        return adoption
    }

    /// Puts back the objects of `files` that are gone from `objects/` (deleted by something
    /// other than the store), from the tree at `tree` that still holds the files: each tree
    /// file of the recorded size is hashed, and one whose content is its recorded SHA-256
    /// becomes its object again, linked under `objects/` and read-only. A file that is
    /// missing, of another size or another content is left for a repair; an object that
    /// exists is not read.
    ///
    /// - Returns: How many objects were put back.
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when an object cannot be linked.
    func restoreMissing(_ files: [FileList.Entry], tree: URL, verifier: any Verifier) throws -> Int {
        var restored = 0
        let treePath = tree.path
        for file in files {
            let objectPath = layout.objectURL(sha256: file.sha256).path
            guard FileInfo(path: objectPath) == nil else { continue }
            let filePath = treePath + "/" + file.path
            guard let info = FileInfo(path: filePath), info.isRegular, info.size == file.size,
                (try? verifier.digest(ofFile: URL(fileURLWithPath: filePath), using: .sha256).hex) == file.sha256
            else { continue }
            try FileSystem.createDirectory(
                URL(fileURLWithPath: objectPath, isDirectory: false).deletingLastPathComponent()
            )
            guard posixLink(filePath, objectPath) == 0 else {
                let code = errno
                if code == EEXIST || Self.linkUnsupported(code) { continue }
                throw posixError(code, "cannot put object \(file.sha256) back from \(file.path)")
            }
            Self.seal(objectPath)
            restored += 1
        }
        return restored
    }

    /// The modification time every installed file carries: one second after the epoch.
    ///
    /// An object and the tree files linked to it are one inode, so writing to a tree file in
    /// place writes to the object too, and to every tree sharing it; the write sets the
    /// modification time to the time of the write. A file whose time is not this one was
    /// written (or touched) since the store installed it: the quick check and `hot status
    /// --check` hash it, and one that no longer hashes to its object's name is damaged. No
    /// per-file record is needed, and comparing costs nothing beyond the `lstat` that checks
    /// presence and size.
    static let pinnedModification = timespec(tv_sec: 1, tv_nsec: 0)

    /// `UTIME_OMIT`, which Swift does not import from the C headers: leave that time as it is.
    #if canImport(Darwin)
    private static let omitTime = -2
    #else
    private static let omitTime = (1 << 30) - 2
    #endif

    /// Makes a new object read-only and gives it the pinned modification time.
    private static func seal(_ path: String) {
        _ = chmod(path, 0o444)
        pin(path)
    }

    /// Gives the file at `path` the pinned modification time (its access time untouched). A
    /// failure is ignored: the file is then hashed by the next check, which pins it again.
    static func pin(_ path: String) {
        var times = [timespec(tv_sec: 0, tv_nsec: omitTime), pinnedModification]
        _ = utimensat(AT_FDCWD, path, &times, AT_SYMLINK_NOFOLLOW)
    }

    /// Whether `link(2)` failed because the file system cannot link this file, not because
    /// something is wrong: no hard links there, or the inode has as many links as it may.
    private static func linkUnsupported(_ code: Int32) -> Bool {
        code == EPERM || code == EMLINK || code == EXDEV || code == ENOTSUP || code == EOPNOTSUPP
    }

    /// Whether an existing object can stand for `file` of a package whose files are claimed
    /// by `claimedBy` (nil: hashed): hashed when `hashing` is set or when another claim than
    /// this package's made it; a claimed object that matches loses its mark.
    private func isUsable(
        _ info: FileInfo,
        _ object: URL,
        for file: FileList.Entry,
        hashing: Bool,
        claimedBy: String? = nil,
        _ verifier: any Verifier
    ) -> Bool {
        guard info.isRegular, info.size == file.size else { return false }
        let claim = ObjectClaim.read(object.path)
        if !hashing, claim == nil || claim == claimedBy { return true }
        guard (try? verifier.digest(ofFile: object, using: .sha256).hex) == file.sha256 else {
            if let claim {
                logger.warning(
                    "an object another package claimed does not hash to its name: replaced",
                    metadata: ["object": "\(file.sha256)", "claimedBy": "\(claim)"]
                )
            }
            return false
        }
        if claim != nil { ObjectClaim.clear(object.path) }
        return true
    }

    /// Marks the staged file of `file` as taken on `claimedBy`'s claim, or, where the file
    /// system keeps no extended attributes, hashes it and refuses a file that does not match.
    private func mark(
        _ stagedPath: String,
        claimedBy: String,
        for file: FileList.Entry,
        _ verifier: any Verifier
    ) throws {
        if ObjectClaim.set(stagedPath, to: claimedBy) { return }
        let digest = try verifier.digest(ofFile: URL(fileURLWithPath: stagedPath), using: .sha256)
        guard digest.hex == file.sha256 else {
            throw HotUpdateError(
                .corruptArchive,
                "the archive records a SHA-256 for this file that its content does not have (\(digest.hex))",
                packageID: claimedBy,
                subject: file.path
            )
        }
    }

    /// The object for `file` when it is present and its content hashes to its name; nil otherwise.
    func intactObject(for file: FileList.Entry, verifier: any Verifier) -> URL? {
        let object = layout.objectURL(sha256: file.sha256)
        guard let info = FileInfo(object), isUsable(info, object, for: file, hashing: true, verifier) else {
            return nil
        }
        return object
    }

    /// Makes `target` a new link to `object`, replacing whatever `target` was, atomically:
    /// link under a temporary name in the same directory, then rename over.
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    func linkObject(_ object: URL, to target: URL) throws {
        let code = try link(object, replacing: target)
        guard code == 0 else {
            throw posixError(code, "cannot link object \(object.lastPathComponent) to \(target.path)")
        }
    }

    /// ``intactObject(for:verifier:)`` that also removes the object's name when the object is
    /// there but damaged (its content does not hash to its name), so that the next package
    /// bringing that content makes a fresh object instead of linking the damaged one. The
    /// trees that link the damaged file keep it until they are repaired, relinked or deleted.
    ///
    /// - Returns: The intact object or nil, and whether a damaged object was removed.
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when the damaged object cannot be removed.
    func intactObjectDiscardingDamaged(
        for file: FileList.Entry,
        verifier: any Verifier
    ) throws
        -> (object: URL?, discarded: Bool)
    {
        let object = layout.objectURL(sha256: file.sha256)
        guard let info = FileInfo(object) else { return (nil, false) }
        if isUsable(info, object, for: file, hashing: true, verifier) { return (object, false) }
        try unlinkFile(object)
        logger.warning("an object does not hash to its name: removed", metadata: ["object": "\(file.sha256)"])
        return (nil, true)
    }

    /// Whether damage found in the tree file at `treePath` may be in the object named for
    /// `file` too: the object is that very file (one inode, linked into the tree), or its
    /// size is not the file's. Only `lstat`s; an absent object is not damaged.
    func mayBeDamaged(_ file: FileList.Entry, linkedAt treePath: String) -> Bool {
        guard let object = FileInfo(path: layout.objectURL(sha256: file.sha256).path) else { return false }
        if !object.isRegular || object.size != file.size { return true }
        return FileInfo(path: treePath)?.inode == object.inode
    }

    /// Makes `target` a link to `object` unless it is one already, atomically (see
    /// ``linkObject(_:to:)``); a directory in its place is removed first.
    ///
    /// - Returns: Whether `target` changed: false when it was a link to `object` already, or
    ///   when the file system will not link it (it stays as it was).
    /// - Throws: ``HotUpdateError/Code/fileSystem``.
    func relink(_ object: URL, at target: URL) throws -> Bool {
        guard let objectInfo = FileInfo(object) else { return false }
        if let current = FileInfo(target), current.isRegular, current.inode == objectInfo.inode { return false }
        if FileSystem.isDirectory(target) { try FileSystem.remove(target) }
        let code = try link(object, replacing: target)
        if code == 0 { return true }
        guard Self.linkUnsupported(code) else {
            throw posixError(code, "cannot link object \(object.lastPathComponent) to \(target.path)")
        }
        return false
    }

    /// ``linkObject(_:to:)`` that returns the `errno` of a failed `link(2)` (0 on success),
    /// so a caller can tell a file system that cannot link apart; other failures throw.
    private func link(_ object: URL, replacing target: URL) throws -> Int32 {
        let directory = target.deletingLastPathComponent()
        try FileSystem.createDirectory(directory)
        let temporary = directory.appendingPathComponent(".\(target.lastPathComponent).\(UUID().uuidString).link")
        guard posixLink(object.path, temporary.path) == 0 else { return errno }
        guard posixRename(temporary.path, target.path) == 0 else {
            let code = errno
            _ = unlink(temporary.path)
            throw posixError(code, "cannot put object \(object.lastPathComponent) at \(target.path)")
        }
        // rename(2) does nothing when both names are links to one file (a tree assembled
        // from objects): the temporary name is then still there.
        _ = unlink(temporary.path)
        return 0
    }

    /// Unlinks those of `digests` whose objects no installed tree links any more. Safe to
    /// repeat, and to run for digests some tree still links: only an object with one link
    /// (its own name) goes.
    func release(_ digests: some Sequence<String>) -> Freed {
        var freed = Freed()
        for hex in Set(digests) {
            FaultPoint.reached("mid-release")
            freed.add(releaseIfUnlinked(layout.objectURL(sha256: hex)))
        }
        return freed
    }

    /// Unlinks every object that no installed tree links, and temporary files a crash left.
    func sweep() -> Freed {
        var freed = Freed()
        for fanout in FileSystem.contents(of: layout.objectsDirectory) {
            let directory = layout.objectsDirectory.appendingPathComponent(fanout, isDirectory: true)
            for name in FileSystem.contents(of: directory) {
                freed.add(releaseIfUnlinked(directory.appendingPathComponent(name, isDirectory: false)))
            }
            if FileSystem.contents(of: directory).isEmpty { _ = rmdir(directory.path) }
        }
        return freed
    }

    private func releaseIfUnlinked(_ object: URL) -> Freed {
        guard let info = FileInfo(object), info.links <= 1 else { return Freed() }
        guard unlink(object.path) == 0 else { return Freed() }
        return Freed(objects: 1, bytes: info.allocatedBytes)
    }

    private func unlinkFile(_ url: URL) throws {
        guard unlink(url.path) == 0 || errno == ENOENT else {
            throw posixError(errno, "cannot remove \(url.path)")
        }
    }

    private func posixError(_ code: Int32, _ message: String) -> HotUpdateError {
        HotUpdateError.system(message, errno: code)
    }
}

/// The mark of an object taken on a package's claim: an extended attribute naming the
/// package (`user.hotupdate.claim` on Linux, `com.hotupdate.claim` on Apple platforms).
enum ObjectClaim {
    #if canImport(Darwin)
    static let name = "com.hotupdate.claim"
    #else
    static let name = "user.hotupdate.claim"
    #endif

    /// Marks `path` as claimed by `package`; false when the file system keeps no extended
    /// attributes there (or refuses this one).
    static func set(_ path: String, to package: String) -> Bool {
        let bytes = Array(package.utf8)
        #if canImport(Darwin)
        return setxattr(path, name, bytes, bytes.count, 0, 0) == 0
        #else
        return setxattr(path, name, bytes, bytes.count, 0) == 0
        #endif
    }

    /// The package that claimed `path`, or nil when it carries no claim; an empty string (a
    /// claim no package makes) when one is there but cannot be read, so that the object is
    /// hashed.
    static func read(_ path: String) -> String? {
        let length = get(path, nil, 0)
        guard length >= 0 else {
            let code = errno
            #if canImport(Darwin)
            let absent = code == ENOATTR || code == ENOTSUP
            #else
            let absent = code == ENODATA || code == ENOTSUP
            #endif
            return absent ? nil : ""
        }
        var buffer = [UInt8](repeating: 0, count: max(length, 1))
        let count = buffer.withUnsafeMutableBytes { get(path, $0.baseAddress, $0.count) }
        guard count >= 0 else { return "" }
        return String(decoding: buffer[0..<min(count, buffer.count)], as: UTF8.self)
    }

    private static func get(_ path: String, _ buffer: UnsafeMutableRawPointer?, _ size: Int) -> Int {
        #if canImport(Darwin)
        return getxattr(path, name, buffer, size, 0, 0)
        #else
        return getxattr(path, name, buffer, size)
        #endif
    }

    /// Removes the claim of `path` (a read-only object made writable by its owner for the
    /// moment it takes).
    static func clear(_ path: String) {
        var info = stat()
        guard stat(path, &info) == 0 else { return }
        _ = chmod(path, (info.st_mode & 0o7777) | S_IWUSR)
        #if canImport(Darwin)
        _ = removexattr(path, name, 0)
        #else
        _ = removexattr(path, name)
        #endif
        _ = chmod(path, info.st_mode & 0o7777)
    }
}

/// What `lstat` says of a path (no link followed).
struct FileInfo: Sendable, Hashable {
    var isRegular: Bool
    var size: Int64
    var links: Int
    var inode: UInt64
    var allocatedBytes: Int64
    /// Whether the modification time is the one the store gives installed files
    /// (``ObjectStore/pinnedModification``): no write since.
    var isPinned: Bool

    init?(_ url: URL) {
        self.init(path: url.path)
    }

    init?(path: String) {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        isRegular = (info.st_mode & S_IFMT) == S_IFREG
        size = Int64(info.st_size)
        links = Int(info.st_nlink)
        inode = UInt64(info.st_ino)
        allocatedBytes = Int64(info.st_blocks) * 512
        #if canImport(Darwin)
        let modified = info.st_mtimespec
        #else
        let modified = info.st_mtim
        #endif
        isPinned =
            modified.tv_sec == ObjectStore.pinnedModification.tv_sec
            && modified.tv_nsec == ObjectStore.pinnedModification.tv_nsec
    }
}

private func posixLink(_ from: String, _ to: String) -> Int32 { link(from, to) }
private func posixRename(_ from: String, _ to: String) -> Int32 { rename(from, to) }
