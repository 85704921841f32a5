import Foundation
import HotCore
import Logging

/// A web (H5) module: the online address its pages live under, and the package that holds
/// its offline copy.
public struct WebModule: Sendable, Hashable {
    /// The package id the module is installed as (the server's `moduleId`).
    public var id: String
    /// The online address the module's pages live under, such as `https://m.example.com/home/`.
    /// Pages under it are served from the package; the path is matched segment by segment.
    public var onlineBase: URL
    /// The folder inside the package that corresponds to ``onlineBase`` (`""` for the
    /// package's root, `"dist"` when the zip holds a `dist/` folder).
    public var packageFolder: String
    /// The file served for a directory address (`…/home/` → `index.html`).
    public var indexFile: String
    /// How long browsers may reuse the module's files when ``WebResponder`` serves them.
    public var cachePolicy: WebCachePolicy

    /// Creates a module.
    ///
    /// - Parameters:
    ///   - id: The package id.
    ///   - onlineBase: The online address of the module's pages.
    ///   - packageFolder: The folder inside the package matching `onlineBase`.
    ///   - indexFile: The file served for a directory address.
    public init(id: String, onlineBase: URL, packageFolder: String = "", indexFile: String = "index.html") {
        self.init(
            id: id,
            onlineBase: onlineBase,
            packageFolder: packageFolder,
            indexFile: indexFile,
            cachePolicy: .revalidate
        )
    }

    /// Creates a module whose files ``WebResponder`` serves under `cachePolicy`.
    ///
    /// - Parameters:
    ///   - id: The package id.
    ///   - onlineBase: The online address of the module's pages.
    ///   - packageFolder: The folder inside the package matching `onlineBase`.
    ///   - indexFile: The file served for a directory address.
    ///   - cachePolicy: How long browsers may reuse the files ``WebResponder`` serves.
    public init(
        id: String,
        onlineBase: URL,
        packageFolder: String = "",
        indexFile: String = "index.html",
        cachePolicy: WebCachePolicy
    ) {
        self.id = id
        self.onlineBase = onlineBase
        self.packageFolder = packageFolder
        self.indexFile = indexFile
        self.cachePolicy = cachePolicy
    }
}

/// Where a web view should load a page from.
public enum WebPageLocation: Sendable, Hashable {
    /// The installed copy: load `fileURL` granting read access to `readAccessRoot`
    /// (`WKWebView.loadFileURL(_:allowingReadAccessTo:)`).
    case local(LocalWebPage)
    /// The online page, for the reason given.
    case online(URL, reason: OnlineFallbackReason)

    /// The URL to load, local or online.
    public var url: URL {
        switch self {
        case .local(let page): page.fileURL
        case .online(let url, _): url
        }
    }
}

/// A page served from an installed web module.
public struct LocalWebPage: Sendable, Hashable {
    /// The file, with the online URL's query and fragment carried over.
    public var fileURL: URL
    /// The directory a web view may read: the module's folder in its package.
    public var readAccessRoot: URL
    /// The module.
    public var moduleID: String
    /// The installed version served.
    public var version: String
    /// The online address the page was resolved from, with its query and fragment.
    public var onlineURL: URL

    /// The file itself, without the query and fragment.
    var file: URL
    /// The file's path inside its package's tree (`/`-separated, with the module's folder).
    var pathInPackage: String
    /// The installed version's directory (`<root>/packages/<id>/<name>`).
    var packageDirectory: URL

    /// The address a web view loads the page at when a scheme handler serves the module
    /// (``WebResponder``): the online address with its scheme replaced by `scheme`, so the page's
    /// origin is `scheme://host` and its relative URLs stay inside the module.
    ///
    /// ```swift
    /// if case .local(let page) = resolver.resolve(url) {
    ///     webView.load(URLRequest(url: page.url(scheme: "app")))  // app://m.example.com/home/index.html
    /// }
    /// ```
    public func url(scheme: String) -> URL {
        var components = URLComponents(url: onlineURL, resolvingAgainstBaseURL: false)
        components?.scheme = scheme
        return components?.url ?? onlineURL
    }
}

/// Why a page is loaded online.
public struct OnlineFallbackReason: Hashable, Sendable, CustomStringConvertible {
    private let name: String
    private init(_ name: String) { self.name = name }
    /// No module's online address covers the URL.
    public static let notAModulePage = OnlineFallbackReason("notAModulePage")
    /// The module has no installed version (not yet downloaded, or removed).
    public static let notInstalled = OnlineFallbackReason("notInstalled")
    /// The server disabled the module (`isActive` false), or the store marks it disabled.
    public static let inactive = OnlineFallbackReason("inactive")
    /// The installed version has no file for this page.
    public static let fileMissing = OnlineFallbackReason("fileMissing")
    /// The URL's path would leave the module (`..`, an encoded slash, a link out).
    public static let unsafePath = OnlineFallbackReason("unsafePath")
    public var description: String { name }
}

/// Maps a web module's online URL to the local file in its installed package, with the
/// read-access root a web view needs, and falls back to the online URL whenever the local
/// copy cannot serve the page.
///
/// `https://m.example.com/home/detail.html?x=1#y`, with a module whose online base is
/// `https://m.example.com/home/`, becomes `file:///…/packages/home/1.0.5/detail.html?x=1#y`
/// with read access to `file:///…/packages/home/1.0.5/`. The page is loaded online when no
/// module covers the URL, the module is not installed, inactive or disabled, its file is
/// missing, or the path would leave the module. Scheme and host compare case-insensitively,
/// default ports are implied, and the base path matches whole segments (`/home` does not
/// cover `/homepage`); the longest matching base wins.
///
/// The resolver is a value built from the installed packages: build a new one after each
/// sync. Made from an updater (``make(modules:updater:inactiveModuleIDs:rebuildingIndex:)``),
/// it checks that a page's file is in the store's name index, mapped and queried in place,
/// then that it is still on disk (one `stat`): a file deleted since it was installed loads
/// online, and its package is marked for the next sync to heal. Made from a list of
/// packages, or when the store has no usable index, it checks the file system. It never
/// touches the network.
///
/// ```swift
/// let resolver = await WebModuleResolver.make(
///     modules: [WebModule(id: "10010", onlineBase: URL(string: "https://m.example.com/home/")!)],
///     updater: updater,
///     inactiveModuleIDs: check.inactiveModuleIDs)
/// switch resolver.resolve(url) {
/// case .local(let page): webView.loadFileURL(page.fileURL, allowingReadAccessTo: page.readAccessRoot)
/// case .online(let url, _): webView.load(URLRequest(url: url))
/// }
/// ```
public struct WebModuleResolver: Sendable {
    /// The modules, longest online base first.
    public let modules: [WebModule]
    /// Each module's online base, parsed once: scheme and host lowercased, port, raw path
    /// segments (in the order of ``modules``).
    private let bases: [(scheme: String?, host: String?, port: Int?, segments: [String])]
    /// The installed packages, by id.
    public let installed: [String: InstalledPackage]
    /// Modules served online whatever is installed.
    public let inactiveModuleIDs: Set<String>
    /// The store's name index when the resolver was made from an updater whose store has one:
    /// pages are then checked against it instead of the file system.
    private let store: IndexedStore?

    /// Whether pages are checked against the store's name index (see
    /// ``make(modules:updater:inactiveModuleIDs:rebuildingIndex:)``).
    package var answersFromNameIndex: Bool { store != nil }

    /// Creates a resolver.
    ///
    /// - Parameters:
    ///   - modules: The web modules the app knows.
    ///   - installed: The installed, enabled packages (as `Updater.installedPackages()`
    ///     returns them: disabled packages are already left out).
    ///   - inactiveModuleIDs: Modules the server disabled, such as
    ///     `OfflinePackageManifestSource.Check.inactiveModuleIDs`.
    public init(modules: [WebModule], installed: [InstalledPackage], inactiveModuleIDs: Set<String> = []) {
        self.init(modules: modules, installed: installed, inactiveModuleIDs: inactiveModuleIDs, store: nil)
    }

    private init(
        modules: [WebModule],
        installed: [InstalledPackage],
        inactiveModuleIDs: Set<String>,
        store: IndexedStore?
    ) {
        self.modules = modules.sorted {
            Self.segments(of: $0.onlineBase).count > Self.segments(of: $1.onlineBase).count
        }
        self.bases = self.modules.map { module in
            let base = module.onlineBase
            return (base.scheme?.lowercased(), base.host?.lowercased(), Self.port(of: base), Self.segments(of: base))
        }
        var byID: [String: InstalledPackage] = [:]
        for package in installed where byID[package.id] == nil { byID[package.id] = package }
        self.installed = byID
        self.inactiveModuleIDs = inactiveModuleIDs
        self.store = store
    }

    /// A resolver over the packages `updater` has installed and not disabled, which checks
    /// pages against the store's name index: opening costs O(packages) and a page costs a
    /// lookup in the mapped index, however many files the store holds.
    ///
    /// When the store has no usable index for its current snapshot (missing, damaged, of an
    /// older format, or naming a tree that is gone; the reason is logged on the updater's
    /// logger), the resolver is made from `Updater.installedPackages()` and checks the file
    /// system, as ``init(modules:installed:inactiveModuleIDs:)`` does; when the store cannot be
    /// read at all, every page is served online.
    ///
    /// ```swift
    /// let resolver = await WebModuleResolver.make(modules: modules, updater: updater)
    /// if case .local(let page) = resolver.resolve(url) { webView.loadFileURL(page.fileURL, allowingReadAccessTo: page.readAccessRoot) }
    /// ```
    ///
    /// - Parameters:
    ///   - modules: The web modules the app knows.
    ///   - updater: The updater whose installed packages serve the modules.
    ///   - inactiveModuleIDs: Modules the server disabled.
    ///   - rebuildingIndex: Whether a missing or damaged name index is rebuilt in the
    ///     background (under the store's exclusive lock); false for read-only use.
    public static func make(
        modules: [WebModule],
        updater: Updater,
        inactiveModuleIDs: Set<String> = [],
        rebuildingIndex: Bool = true
    ) async -> WebModuleResolver {
        if let store = await IndexedStore.open(updater, rebuilding: rebuildingIndex, resolvingLinks: true) {
            return WebModuleResolver(
                modules: modules,
                installed: store.locations,
                inactiveModuleIDs: inactiveModuleIDs,
                store: store
            )
        }
        var installed: [InstalledPackage] = []
        do {
            installed = try await updater.installedPackages()
        } catch {
            updater.configuration.logger.error("the store cannot be read; serving web modules online: \(error)")
        }
        return WebModuleResolver(modules: modules, installed: installed, inactiveModuleIDs: inactiveModuleIDs)
    }

    /// Where to load `url` from.
    ///
    /// - Parameter url: An online page address.
    /// - Returns: The local page, or the online URL and why.
    public func resolve(_ url: URL) -> WebPageLocation {
        guard let address = Address(url), let (module, rest, slash) = match(address) else {
            return .online(url, reason: .notAModulePage)
        }
        guard !inactiveModuleIDs.contains(module.id) else { return .online(url, reason: .inactive) }
        guard let package = installed[module.id] else { return .online(url, reason: .notInstalled) }

        var components = rest
        if components.isEmpty || slash {
            components.append(module.indexFile)
        }
        let folder = module.packageFolder.split(separator: "/").map(String.init)
        guard (folder + components).allSatisfy(Self.isSafeComponent) else {
            return .online(url, reason: .unsafePath)
        }
        let readAccessRoot: URL
        let file: URL
        let packageDirectory: URL
        if let store, let number = store.index.packageNumber(id: module.id) {
            // The index lists the package's regular files, found without following a link:
            // a path it has is inside the package.
            guard store.contains(package: number, path: (folder + components).joined(separator: "/")) else {
                return .online(url, reason: .fileMissing)
            }
            let packageRoot = store.resolvedDirectory(number)
            packageDirectory = store.directory(number)
            readAccessRoot = folder.reduce(packageRoot) { $0.appendingPathComponent($1, isDirectory: true) }
            file = components.reduce(readAccessRoot) { $0.appendingPathComponent($1) }
            // Installed, and gone since (one stat, against a page load): the page loads online,
            // and the package is marked for the next sync to heal.
            guard FileSystem.isRegularFile(atPath: file.path) else {
                store.damage.reportLoss(
                    package: number,
                    id: module.id,
                    path: (folder + components).joined(separator: "/"),
                    root: store.root
                )
                return .online(url, reason: .fileMissing)
            }
        } else {
            let packageRoot = package.directory.standardizedFileURL.resolvingSymlinksInPath()
            packageDirectory = package.directory
            readAccessRoot = folder.reduce(packageRoot) { $0.appendingPathComponent($1, isDirectory: true) }
            file = components.reduce(readAccessRoot) { $0.appendingPathComponent($1) }
            guard file.resolvingSymlinksInPath().path.hasPrefix(readAccessRoot.path + "/") else {
                return .online(url, reason: .unsafePath)
            }
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: file.path, isDirectory: &isDirectory), !isDirectory.boolValue
            else {
                return .online(url, reason: .fileMissing)
            }
        }
        var local = URLComponents(url: file, resolvingAgainstBaseURL: false)
        let online = URLComponents(url: url, resolvingAgainstBaseURL: false)
        local?.percentEncodedQuery = online?.percentEncodedQuery
        local?.percentEncodedFragment = online?.percentEncodedFragment
        return .local(
            LocalWebPage(
                fileURL: local?.url ?? file,
                readAccessRoot: readAccessRoot,
                moduleID: module.id,
                version: package.version,
                onlineURL: url,
                file: file,
                pathInPackage: (folder + components).joined(separator: "/"),
                packageDirectory: packageDirectory
            )
        )
    }

    /// An address in the parts the resolver matches, as a server that parsed a request has
    /// them: no URL is built or read.
    package struct Address: Sendable {
        /// The scheme, lowercased.
        var scheme: String
        /// The host, lowercased.
        var host: String
        /// The port; the scheme's own when the address names none.
        var port: Int?
        /// The path as written (percent-encoded), without the query.
        var rawPath: String

        /// The parts of `scheme://host:port` and `rawPath`.
        package init(scheme: String, host: String, port: Int?, rawPath: String) {
            (self.scheme, self.host, self.port, self.rawPath) = (scheme, host, port, rawPath)
        }

        /// The parts of `url`; nil without a scheme or host.
        init?(_ url: URL) {
            guard let scheme = url.scheme?.lowercased(), let host = url.host?.lowercased() else { return nil }
            self.init(
                scheme: scheme,
                host: host,
                port: WebModuleResolver.port(of: url),
                rawPath: WebModuleResolver.rawPath(of: url)
            )
        }
    }

    /// The module covering `address`, the decoded path components after its base, and whether
    /// the raw path ends with `/`.
    private func match(_ address: Address) -> (WebModule, [String], Bool)? {
        // Split on the bytes: a path's "/" is ASCII, and no character is assembled.
        let path = address.rawPath.utf8.split(separator: UInt8(ascii: "/")).map { Substring($0) }
        for (index, base) in bases.enumerated() {
            guard base.scheme == address.scheme, base.host == address.host, base.port == address.port else {
                continue
            }
            let prefix = base.segments
            guard path.count >= prefix.count, path.starts(with: prefix, by: { $0 == $1 }) else { continue }
            // Decode each raw segment on its own, so an encoded "/" stays inside one component.
            let rest = path.dropFirst(prefix.count).map { segment in
                segment.utf8.contains(UInt8(ascii: "%"))
                    ? (segment.removingPercentEncoding ?? "\u{0}") : String(segment)
            }
            return (modules[index], rest, address.rawPath.hasSuffix("/"))
        }
        return nil
    }

    /// Where the responder finds a request's file, without the URLs ``resolve(_:)`` builds
    /// for a web view.
    enum Location {
        /// A file the installed package has: its path inside the package and on disk.
        case file(module: WebModule, pathInPackage: String, filePath: String, packageDirectory: String)
        /// Not the module's to answer.
        case online(OnlineFallbackReason)
    }

    /// ``resolve(_:)`` for the responder: the same answers, and, from the store's name index,
    /// no URL built and no `stat` (the responder opens the file and checks it itself).
    func locate(_ url: URL) -> Location {
        guard let address = Address(url) else { return locateThroughResolve(url) }
        return locate(address) { url }
    }

    /// ``locate(_:)`` of an address in parts; `url` makes the URL for the rare answers that
    /// need one (no name index, a module the index does not know).
    func locate(_ address: Address, url: () -> URL) -> Location {
        guard let store, let (module, rest, slash) = match(address) else { return locateThroughResolve(url()) }
        guard !inactiveModuleIDs.contains(module.id) else { return .online(.inactive) }
        guard installed[module.id] != nil else { return .online(.notInstalled) }
        guard let number = store.index.packageNumber(id: module.id) else { return locateThroughResolve(url()) }
        var components = rest
        if components.isEmpty || slash { components.append(module.indexFile) }
        let folder = module.packageFolder.isEmpty ? [] : module.packageFolder.split(separator: "/").map(String.init)
        guard folder.allSatisfy(Self.isSafeComponent), components.allSatisfy(Self.isSafeComponent) else {
            return .online(.unsafePath)
        }
        let inPackage = (folder.isEmpty ? components : folder + components).joined(separator: "/")
        guard store.contains(package: number, path: inPackage) else { return .online(.fileMissing) }
        let directory = store.directoryPath(number)
        return .file(
            module: module,
            pathInPackage: inPackage,
            filePath: directory + "/" + inPackage,
            packageDirectory: directory
        )
    }

    private func locateThroughResolve(_ url: URL) -> Location {
        switch resolve(url) {
        case .online(_, let reason): return .online(reason)
        case .local(let page):
            guard let module = modules.first(where: { $0.id == page.moduleID }) else { return .online(.notAModulePage) }
            return .file(
                module: module,
                pathInPackage: page.pathInPackage,
                filePath: page.file.path,
                packageDirectory: page.packageDirectory.path
            )
        }
    }

    /// Marks the page's package for the next sync to heal, when its file is gone though the
    /// index lists it (as ``resolve(_:)`` does when it finds that).
    func reportMissing(_ url: URL) {
        _ = resolve(url)
    }

    private static func isSafeComponent(_ component: String) -> Bool {
        // Bytes, not Foundation's string search: this runs for every part of every request.
        !component.isEmpty && component != "." && component != ".."
            && !component.utf8.contains { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "\\") || $0 == 0 }
    }

    /// The URL's path as written (percent-encoded).
    fileprivate static func rawPath(of url: URL) -> String {
        URLComponents(url: url, resolvingAgainstBaseURL: false)?.percentEncodedPath ?? url.path
    }

    /// The URL's non-empty raw path segments.
    private static func segments(of url: URL) -> [String] {
        rawPath(of: url).split(separator: "/").map(String.init)
    }

    fileprivate static func port(of url: URL) -> Int? {
        if let port = url.port { return port }
        switch url.scheme?.lowercased() {
        case "http": return 80
        case "https": return 443
        default: return nil
        }
    }
}
