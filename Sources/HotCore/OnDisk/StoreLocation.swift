import Foundation

/// Where an app keeps its store root: a folder the system never empties on its own, left out
/// of backups.
///
/// ```swift
/// let root = try StoreLocation.applicationSupport(subdirectory: "HotUpdate")
/// let updater = Updater(configuration: UpdaterConfiguration(
///     root: root, transport: transport, unarchiver: ZipUnarchiver(),
///     verifier: CryptoVerifier(), store: FileMetadataStore(root: root)))
/// ```
///
/// **Why not Caches.** The system empties `Caches` when space runs low, between two launches,
/// without asking. A store there loses a guarded version on its launch trial (see
/// <doc:LaunchSafety>) before the launch that confirms or rolls it back, together with the
/// list of versions blocked for crashing the app, so the next sync downloads a blocked
/// version and tries it again. Application Support is never emptied by the system.
///
/// **Why out of backups.** Everything in the store can be downloaded again, so it has no
/// place in the user's iCloud or computer backups: on Apple platforms the folder is marked
/// `isExcludedFromBackup`, which covers everything under it. Call this at every launch, before
/// building the ``Updater``: the mark is set again each time, so a folder restored or moved
/// without it gets it back.
public enum StoreLocation {
    /// The store root `subdirectory` under the platform's folder for an app's own data,
    /// created if missing (an existing one is reused as it is) and, on Apple platforms,
    /// excluded from backup.
    ///
    /// - Apple platforms: `FileManager.url(for: .applicationSupportDirectory, in:
    ///   .userDomainMask, appropriateFor: nil, create: true)` + `subdirectory`, marked
    ///   `isExcludedFromBackup`. A macOS app outside the sandbox shares that folder with every
    ///   other app of the user: name the app in `subdirectory` (`"com.example.app/HotUpdate"`).
    /// - Linux and other platforms: the XDG data home (`$XDG_DATA_HOME` when it is an absolute
    ///   path, `~/.local/share` otherwise) + `subdirectory`. There is no backup to leave it
    ///   out of, and nothing is marked (corelibs Foundation accepts the resource value and
    ///   ignores it).
    ///
    /// An app group shares no Application Support folder: a store that an app and its
    /// extensions open together goes in the group's container instead (see
    /// <doc:ManyPackages>).
    ///
    /// - Parameter subdirectory: The folder under the platform's data folder: one or more
    ///   names separated by `/`, none of them empty, `.` or `..`.
    /// - Returns: The store root's URL, a directory that exists.
    /// - Throws: ``HotUpdateError/Code/invalidArgument`` for a `subdirectory` that names no
    ///   folder inside the data folder; ``HotUpdateError/Code/fileSystem`` (or
    ///   ``HotUpdateError/Code/diskFull``) naming the path when the folder cannot be found,
    ///   created or excluded from backup.
    public static func applicationSupport(subdirectory: String) throws -> URL {
        try directory(subdirectory: subdirectory, calls: .system)
    }

    /// ``applicationSupport(subdirectory:)`` with the platform calls to make. Every platform
    /// runs this decision; only `calls` differ, so tests run Apple's path with stand-ins.
    ///
    /// Where `calls` has an Application Support folder, the store goes under it; otherwise
    /// under ``dataHome(environment:accountHome:)``. The folder is created, then excluded from
    /// backup where `calls` can do that.
    package static func directory(subdirectory: String, calls: StoreLocationCalls) throws -> URL {
        let names = try validatedNames(subdirectory)
        let base: URL
        if let applicationSupport = calls.applicationSupport {
            do {
                base = try applicationSupport()
            } catch {
                throw HotUpdateError.wrap(error, as: .fileSystem, "cannot find the Application Support folder")
            }
        } else {
            base = dataHome(environment: calls.environment(), accountHome: calls.accountHome)
        }
        var folder = base
        for name in names { folder.appendPathComponent(name, isDirectory: true) }
        try createFolder(folder)
        if let excludeFromBackup = calls.excludeFromBackup {
            do {
                try excludeFromBackup(folder)
            } catch {
                var wrapped = HotUpdateError.wrap(
                    error,
                    as: .fileSystem,
                    "cannot exclude the store folder \(folder.path) from backup"
                )
                wrapped.subject = folder.path
                throw wrapped
            }
        }
        return folder
    }

    /// The XDG base directory for user data: `$XDG_DATA_HOME` when it is an absolute path
    /// (the specification says to ignore a relative one), else `$HOME/.local/share`, with the
    /// account's home directory when `HOME` is not an absolute path either.
    package static func dataHome(environment: [String: String], accountHome: () -> URL) -> URL {
        if let dataHome = environment["XDG_DATA_HOME"], dataHome.hasPrefix("/") {
            return URL(fileURLWithPath: dataHome, isDirectory: true)
        }
        let home: URL
        if let path = environment["HOME"], path.hasPrefix("/") {
            home = URL(fileURLWithPath: path, isDirectory: true)
        } else {
            home = accountHome()
        }
        return home.appendingPathComponent(".local", isDirectory: true)
            .appendingPathComponent("share", isDirectory: true)
    }

    /// The names of `subdirectory`, or ``HotUpdateError/Code/invalidArgument`` when it is
    /// empty, absolute, or has an empty, `.` or `..` name.
    private static func validatedNames(_ subdirectory: String) throws -> [String] {
        let names = subdirectory.split(separator: "/", omittingEmptySubsequences: false).map(String.init)
        let valid = !subdirectory.isEmpty && names.allSatisfy { !$0.isEmpty && $0 != "." && $0 != ".." }
        guard valid else {
            throw HotUpdateError(
                .invalidArgument,
                "the store's subdirectory must be one or more names separated by /, none empty, . or .., "
                    + "not \"\(subdirectory)\""
            )
        }
        return names
    }

    /// Creates `folder` and its parents, or reuses it when it is already a directory.
    private static func createFolder(_ folder: URL) throws {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: folder.path, isDirectory: &isDirectory), isDirectory.boolValue {
            return
        }
        do {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        } catch {
            let what = "cannot create the store folder \(folder.path)"
            if let code = posixCode(of: error) {
                throw HotUpdateError.system(what, errno: code, subject: folder.path)
            }
            var wrapped = HotUpdateError.wrap(error, as: .fileSystem, what)
            wrapped.subject = folder.path
            throw wrapped
        }
    }

    /// The `errno` a Foundation error carries, itself or as an underlying error. The
    /// underlying error is read as `any Error`: corelibs Foundation stores a `POSIXError`
    /// there, which a cast to `NSError` does not bridge.
    private static func posixCode(of error: any Error) -> Int32? {
        var current: (any Error)? = error
        var depth = 0
        while let next = current, depth < 8 {
            if let posix = next as? POSIXError { return posix.code.rawValue }
            let ns = next as NSError
            if ns.domain == NSPOSIXErrorDomain { return Int32(truncatingIfNeeded: ns.code) }
            current = ns.userInfo[NSUnderlyingErrorKey] as? any Error
            depth += 1
        }
        return nil
    }
}

/// The platform calls ``StoreLocation/directory(subdirectory:calls:)`` is made of. ``system``
/// holds this platform's; tests pass stand-ins to run the other platforms' path of the same
/// decision.
package struct StoreLocationCalls: Sendable {
    /// The app's Application Support folder (Apple platforms); nil where the platform has
    /// none and the XDG data home is used.
    package var applicationSupport: (@Sendable () throws -> URL)?
    /// The process's environment (`XDG_DATA_HOME`, `HOME`).
    package var environment: @Sendable () -> [String: String]
    /// The account's home directory, for when `HOME` is not set.
    package var accountHome: @Sendable () -> URL
    /// Marks a folder `isExcludedFromBackup` (Apple platforms); nil where there is no backup
    /// to leave it out of.
    package var excludeFromBackup: (@Sendable (URL) throws -> Void)?

    package init(
        applicationSupport: (@Sendable () throws -> URL)?,
        environment: @escaping @Sendable () -> [String: String],
        accountHome: @escaping @Sendable () -> URL,
        excludeFromBackup: (@Sendable (URL) throws -> Void)?
    ) {
        self.applicationSupport = applicationSupport
        self.environment = environment
        self.accountHome = accountHome
        self.excludeFromBackup = excludeFromBackup
    }

    /// This platform's calls.
    package static let system: StoreLocationCalls = {
        #if canImport(Darwin)
        let applicationSupport: (@Sendable () throws -> URL)? = {
            try FileManager.default.url(
                for: .applicationSupportDirectory,
                in: .userDomainMask,
                appropriateFor: nil,
                create: true
            )
        }
        let excludeFromBackup: (@Sendable (URL) throws -> Void)? = { folder in
            var folder = folder
            var values = URLResourceValues()
            values.isExcludedFromBackup = true
            try folder.setResourceValues(values)
        }
        #else
        let applicationSupport: (@Sendable () throws -> URL)? = nil
        let excludeFromBackup: (@Sendable (URL) throws -> Void)? = nil
        #endif
        return StoreLocationCalls(
            applicationSupport: applicationSupport,
            environment: { ProcessInfo.processInfo.environment },
            accountHome: { URL(fileURLWithPath: NSHomeDirectory(), isDirectory: true) },
            excludeFromBackup: excludeFromBackup
        )
    }()
}
