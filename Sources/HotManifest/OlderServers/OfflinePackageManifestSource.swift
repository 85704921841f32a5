import Foundation
import HotCore

/// Asks an H5 offline-package server which web modules to install, the way such servers
/// are usually spoken to: the app POSTs what it has, the server answers per module.
///
/// ## The exchange
///
/// The request is a `POST` of JSON (`Content-Type: application/json`):
///
/// ```json
/// {"data": {"appCode": "SomeApp", "appVer": "1.2.0", "platform": "ios",
///           "h5vers": [{"moduleId": "10010", "moduleVer": "1.0.4", "isActive": true}]}}
/// ```
///
/// (set ``wrapsRequestInData`` to false for servers that take the object without `data`).
/// `h5vers` lists what is installed, taken at every check from ``installedModules``.
///
/// The answer:
///
/// ```json
/// {"resultData": [{"moduleId": "10010", "packageUrl": "https://cdn.example.com/10010-1.0.5.zip",
///                  "packageMD5": "…", "patchUrl": "…", "patchMD5": "…", "mode": 1, "isActive": true}]}
/// ```
///
/// - `mode` is `1` or `"full"` for the full package, `2` or `"patch"` for a patch. The seed
///   defines no patch format; HotUpdate's is the delta package `hot pack` writes (HotCore's
///   `DeltaLayout`) made against the module's installed version, the one the check reported:
///   in patch mode with a `patchUrl` and `patchMD5` the package's descriptor lists that delta
///   (`PackageDescriptor.deltas`) and the updater assembles the new version from the
///   installed one plus the delta. The full package (`packageUrl`, `packageMD5`) stays the
///   fallback: a patch that is missing, malformed, made against other content or failing any
///   check installs the full package, and the sync report says so.
///   ``ModuleUpdate/requestedMode`` tells what the server asked for.
/// - `isActive: false` (also `0` or `"false"`) disables the module: nothing is downloaded, its
///   id is in ``Check/inactiveModuleIDs`` and in the manifest's
///   `Manifest.disabledPackageIDs`, so a sync marks an installed module
///   `PackageState.disabled` (its files stay, it no longer resolves) and the app shows the
///   online page instead (see `WebModuleResolver` in HotAssets). When the server activates it
///   again with the installed version, the sync enables it without a download.
/// - An optional `moduleVer` is used as the installed version; without one the version is the
///   package's MD5.
/// - Modules the answer does not mention are left as they are (the manifest is not complete).
/// - A malformed module fails alone: it is left out of the manifest with its error in
///   ``Check/refused``, and the other modules install. The answer is unsigned, so refusing it
///   all for one bad entry would protect nothing. Patch fields are read only for an active
///   module in patch mode; a malformed one drops the patch, not the module.
///
/// ## What this format cannot protect against
///
/// Nothing in the answer is signed: the MD5s arrive in the same response as the URLs, so
/// they only detect accidental corruption. Whoever can change the answer — a compromised
/// server, or a network attacker where TLS is absent, broken or intercepted by a
/// user-installed certificate — can:
/// - **substitute** any module with their own package and matching MD5;
/// - **roll back** a module to any older package, or **freeze** it by answering with the
///   installed version forever (the answer has no version number and no expiry);
/// - **disable** any module (forcing the online page) or hide updates;
/// - **stall or flood** the download: bounded only by the updater's timeouts and
///   `maxPackageBytes`, since no size is given;
/// - exploit **MD5 collisions**, were the answer itself trusted.
///
/// Use it to keep existing servers working; publish new modules through the signed native
/// manifest.
///
/// ```swift
/// let source = OfflinePackageManifestSource(
///     url: URL(string: "https://h5.example.com/offline/check")!, transport: CurlTransport(),
///     app: .init(appCode: "SomeApp", appVersion: "1.2.0", platform: "ios"),
///     snapshot: { try await updater.currentSnapshot() })
/// let check = try await source.check()
/// let report = try await updater.apply(check.manifest)
/// disabledModules = check.inactiveModuleIDs   // give these to WebModuleResolver
/// ```
public struct OfflinePackageManifestSource: ManifestSource {
    /// Who is asking: the app's identity as the server knows it.
    public struct App: Sendable, Hashable {
        /// The app's code, agreed with the server (`appCode`).
        public var appCode: String
        /// The app's version (`appVer`).
        public var appVersion: String
        /// The platform (`platform`), such as `ios` or `android`.
        public var platform: String

        /// Creates an identity.
        public init(appCode: String, appVersion: String, platform: String) {
            self.appCode = appCode
            self.appVersion = appVersion
            self.platform = platform
        }
    }

    /// One installed module as reported to the server (an element of `h5vers`).
    public struct InstalledModule: Sendable, Hashable, Codable {
        /// The module id (`moduleId`).
        public var moduleId: String
        /// The installed version (`moduleVer`).
        public var moduleVer: String
        /// Whether the module is in use (`isActive`).
        public var isActive: Bool

        /// Creates a value.
        public init(moduleId: String, moduleVer: String, isActive: Bool) {
            self.moduleId = moduleId
            self.moduleVer = moduleVer
            self.isActive = isActive
        }
    }

    /// What the server asked for a module.
    public struct Mode: Hashable, Sendable, CustomStringConvertible {
        private let name: String
        private init(_ name: String) { self.name = name }
        /// The full package (`mode` 1 or `"full"`).
        public static let full = Mode("full")
        /// A patch from the installed version (`mode` 2 or `"patch"`): a delta package, with the
        /// full package as the fallback.
        public static let patch = Mode("patch")
        public var description: String { name }
    }

    /// One module of the server's answer.
    public struct ModuleUpdate: Sendable, Hashable {
        /// The module id, which is the package id.
        public var moduleID: String
        /// Whether the server wants the module used.
        public var isActive: Bool
        /// What the server asked for.
        public var requestedMode: Mode
        /// The package installed: the full package, listing the patch as a delta from the
        /// reported version in patch mode. Nil when inactive.
        public var package: PackageDescriptor?
        /// The patch the server offered, if any.
        public var patchURL: URL?
        /// The patch's MD5, if any.
        public var patchMD5: Digest?
        /// Why the offered patch is not used, when it is malformed (the full package installs).
        public var patchError: HotUpdateError?

        public func hash(into hasher: inout Hasher) {
            hasher.combine(moduleID)
            hasher.combine(package)
        }
    }

    /// The result of one check.
    public struct Check: Sendable, Hashable {
        /// The active modules' packages and the inactive modules' ids (as
        /// `Manifest.disabledPackageIDs`), for `Updater.apply(_:)`. Not complete: modules
        /// the answer leaves out are kept.
        public var manifest: Manifest
        /// Every module of the answer, in order.
        public var modules: [ModuleUpdate]
        /// The modules the server disabled (`isActive` false): show their online pages.
        public var inactiveModuleIDs: Set<String>
        /// What was posted as `h5vers`.
        public var reported: [InstalledModule]
        /// The malformed modules of the answer, each left out of the manifest with its reason
        /// (naming the module when its id could be read); the others are unaffected.
        public var refused: [HotUpdateError] = []

        public func hash(into hasher: inout Hasher) {
            hasher.combine(manifest)
            hasher.combine(modules)
        }
    }

    /// Where the check is posted.
    public var url: URL
    /// How to post it.
    public var transport: any Transport
    /// The app's identity.
    public var app: App
    /// What is installed, asked at every check.
    public var installedModules: @Sendable () async throws -> [InstalledModule]
    /// Whether the request is wrapped as `{"data": {…}}`, as in the format's reference client.
    public var wrapsRequestInData: Bool
    /// Extra request headers (authentication, say).
    public var headers: [String: String]
    /// The largest answer accepted.
    public var maxBytes: Int64
    /// Time limits for the check.
    public var timeouts: TransportRequest.Timeouts

    /// Creates a source that asks `installedModules` what to report.
    ///
    /// - Parameters:
    ///   - url: Where the check is posted.
    ///   - transport: How to post it.
    ///   - app: The app's identity.
    ///   - installedModules: What is installed, asked at every check.
    ///   - wrapsRequestInData: Whether the request is wrapped as `{"data": {…}}`.
    ///   - headers: Extra request headers.
    ///   - maxBytes: The largest answer accepted.
    ///   - timeouts: Time limits for the check.
    public init(
        url: URL,
        transport: any Transport,
        app: App,
        installedModules: @escaping @Sendable () async throws -> [InstalledModule],
        wrapsRequestInData: Bool = true,
        headers: [String: String] = [:],
        maxBytes: Int64 = 1 << 20,
        timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts()
    ) {
        self.url = url
        self.transport = transport
        self.app = app
        self.installedModules = installedModules
        self.wrapsRequestInData = wrapsRequestInData
        self.headers = headers
        self.maxBytes = maxBytes
        self.timeouts = timeouts
    }

    /// Creates a source that reports the packages of a store snapshot, typically
    /// `{ try await updater.currentSnapshot() }`.
    ///
    /// - Parameters:
    ///   - url: Where the check is posted.
    ///   - transport: How to post it.
    ///   - app: The app's identity.
    ///   - snapshot: Returns the store's snapshot at every check.
    ///   - moduleIDs: Which packages are web modules; nil reports every package.
    ///   - wrapsRequestInData: Whether the request is wrapped as `{"data": {…}}`.
    ///   - headers: Extra request headers.
    ///   - maxBytes: The largest answer accepted.
    ///   - timeouts: Time limits for the check.
    public init(
        url: URL,
        transport: any Transport,
        app: App,
        snapshot: @escaping @Sendable () async throws -> StoreSnapshot,
        moduleIDs: Set<String>? = nil,
        wrapsRequestInData: Bool = true,
        headers: [String: String] = [:],
        maxBytes: Int64 = 1 << 20,
        timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts()
    ) {
        self.init(
            url: url,
            transport: transport,
            app: app,
            installedModules: { Self.installedModules(in: try await snapshot(), only: moduleIDs) },
            wrapsRequestInData: wrapsRequestInData,
            headers: headers,
            maxBytes: maxBytes,
            timeouts: timeouts
        )
    }

    /// The modules a snapshot holds: every package with an active version, sorted by id; a
    /// package the store marks `PackageState.disabled` is reported inactive.
    ///
    /// - Parameters:
    ///   - snapshot: The store's snapshot.
    ///   - moduleIDs: Which packages are web modules; nil for all.
    public static func installedModules(
        in snapshot: StoreSnapshot,
        only moduleIDs: Set<String>? = nil
    )
        -> [InstalledModule]
    {
        snapshot.packages.values
            .filter { moduleIDs?.contains($0.id) ?? true }
            .compactMap { record in
                record.active.map {
                    InstalledModule(moduleId: record.id, moduleVer: $0.version, isActive: record.state != .disabled)
                }
            }
            .sorted { $0.moduleId < $1.moduleId }
    }

    /// Posts the check and returns the active modules' packages (see ``check()`` for the
    /// inactive ones).
    ///
    /// - Throws: As ``check()``.
    public func fetchManifest() async throws -> Manifest {
        try await check().manifest
    }

    /// Posts what is installed and reads the answer.
    ///
    /// - Returns: The packages to install, every module's answer and the disabled modules.
    /// - Throws: `HotUpdateError.Code.manifestInvalid` for a malformed answer (naming the
    ///   module); the transport's errors, `HotUpdateError.Code.httpStatus` and
    ///   `HotUpdateError.Code.byteLimitExceeded`; whatever ``installedModules`` throws.
    public func check() async throws -> Check {
        let installed = try await installedModules()
        var requestHeaders = headers
        requestHeaders["Content-Type"] = "application/json"
        requestHeaders["Accept"] = "application/json"
        let data = try await transport.fetchDocument(
            url: url,
            maxBytes: maxBytes,
            timeouts: timeouts,
            method: "POST",
            headers: requestHeaders,
            body: try requestBody(reporting: installed)
        )
        var check = try Self.parseAnswer(data, relativeTo: url, installed: installed)
        check.reported = installed
        return check
    }

    /// The JSON posted for `installed`.
    ///
    /// - Throws: `HotUpdateError.Code.invalidArgument` when it cannot be encoded.
    public func requestBody(reporting installed: [InstalledModule]) throws -> Data {
        struct Body: Encodable {
            var appCode: String
            var appVer: String
            var platform: String
            var h5vers: [InstalledModule]
        }
        struct Wrapped: Encodable { var data: Body }
        let body = Body(appCode: app.appCode, appVer: app.appVersion, platform: app.platform, h5vers: installed)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        do {
            return wrapsRequestInData ? try encoder.encode(Wrapped(data: body)) : try encoder.encode(body)
        } catch {
            throw HotUpdateError.wrap(error, as: .invalidArgument, "cannot encode the offline-package check")
        }
    }

    /// Parses the server's answer.
    ///
    /// - Parameters:
    ///   - data: The answer's bytes.
    ///   - baseURL: What relative package URLs are resolved against.
    ///   - installed: What the check reported: a patch applies to the module's version here.
    /// - Returns: The check, with an empty ``Check/reported``; malformed modules are in
    ///   ``Check/refused``.
    /// - Throws: `HotUpdateError.Code.manifestInvalid` when the answer as a whole cannot be read.
    public static func parseAnswer(
        _ data: Data,
        relativeTo baseURL: URL,
        installed: [InstalledModule] = []
    ) throws
        -> Check
    {
        let answer: Answer
        do {
            answer = try JSONDecoder().decode(Answer.self, from: data)
        } catch {
            throw HotUpdateError(
                .manifestInvalid,
                "the offline-package answer is not the expected JSON: \(error)",
                subject: baseURL.absoluteString,
                cause: SendableErrorBox(error)
            )
        }
        guard let modules = answer.resultData else {
            throw HotUpdateError(
                .manifestInvalid,
                "the offline-package answer has no resultData list",
                subject: baseURL.absoluteString
            )
        }
        let installedVersions = Dictionary(
            installed.map { ($0.moduleId, $0.moduleVer) },
            uniquingKeysWith: { first, _ in first }
        )
        var updates: [ModuleUpdate] = []
        var refused: [HotUpdateError] = []
        var seen = Set<String>()
        for (index, module) in modules.enumerated() {
            do {
                let update = try update(
                    from: module,
                    at: index,
                    relativeTo: baseURL,
                    installedVersion: module.moduleId.flatMap { installedVersions[$0.value] }
                )
                guard seen.insert(update.moduleID).inserted else {
                    throw HotUpdateError(
                        .manifestInvalid,
                        "the module appears twice in resultData",
                        packageID: update.moduleID
                    )
                }
                updates.append(update)
            } catch let error as HotUpdateError {
                refused.append(error)
            }
        }
        let inactive = Set(updates.filter { !$0.isActive }.map(\.moduleID))
        let manifest = try Manifest(
            schema: 0,
            packages: updates.compactMap(\.package),
            isComplete: false,
            disabledPackageIDs: inactive
        )
        return Check(manifest: manifest, modules: updates, inactiveModuleIDs: inactive, reported: [], refused: refused)
    }

    private static func update(
        from module: AnswerModule,
        at index: Int,
        relativeTo baseURL: URL,
        installedVersion: String?
    ) throws -> ModuleUpdate {
        guard let id = module.moduleId?.value, !id.isEmpty else {
            throw HotUpdateError(
                .manifestInvalid,
                "module \(index + 1) of resultData has no moduleId",
                subject: baseURL.absoluteString
            )
        }
        try PackageDescriptor.validateComponent(id, what: "moduleId")
        let mode: Mode
        switch module.mode?.value.lowercased() {
        case nil, "1", "full": mode = .full
        case "2", "patch": mode = .patch
        case let other?:
            throw HotUpdateError(.manifestInvalid, "mode '\(other)' is neither full (1) nor patch (2)", packageID: id)
        }
        let isActive = try module.isActive.map { try $0.bool(what: "isActive", packageID: id) } ?? true
        guard isActive else {
            // An inactive module downloads nothing: its patch fields are not read.
            return ModuleUpdate(moduleID: id, isActive: false, requestedMode: mode, package: nil)
        }
        var patchURL: URL?
        var patchMD5: Digest?
        var patchError: HotUpdateError?
        if mode == .patch {
            do {
                patchURL = try module.patchUrl.flatMap {
                    try optionalURL($0, relativeTo: baseURL, what: "patchUrl", id: id)
                }
                patchMD5 = try module.patchMD5.flatMap { try optionalMD5($0, what: "patchMD5", id: id) }
            } catch let error as HotUpdateError {
                patchError = error
            }
        }
        guard
            let packageURL = try module.packageUrl.flatMap({
                try optionalURL($0, relativeTo: baseURL, what: "packageUrl", id: id)
            })
        else {
            let why = mode == .patch ? " (patch mode needs it too: it is the fallback)" : ""
            throw HotUpdateError(.manifestInvalid, "the active module has no packageUrl\(why)", packageID: id)
        }
        guard let md5 = try module.packageMD5.flatMap({ try optionalMD5($0, what: "packageMD5", id: id) }) else {
            throw HotUpdateError(.manifestInvalid, "the active module has no packageMD5", packageID: id)
        }
        let version = module.moduleVer?.value ?? md5.hex
        var package = try PackageDescriptor(id: id, version: version, url: packageURL, md5: md5)
        if let patchURL, let patchMD5, let installedVersion, installedVersion != version {
            do {
                package.deltas = [
                    try PackageDescriptor.Delta(
                        baseVersion: installedVersion,
                        baseSHA256: nil,
                        url: patchURL,
                        size: nil,
                        sha256: nil,
                        md5: patchMD5
                    )
                ]
            } catch let error as HotUpdateError {
                patchError = error
            }
        }
        return ModuleUpdate(
            moduleID: id,
            isActive: true,
            requestedMode: mode,
            package: package,
            patchURL: patchURL,
            patchMD5: patchMD5,
            patchError: patchError
        )
    }

    private static func optionalURL(_ text: String, relativeTo baseURL: URL, what: String, id: String) throws -> URL? {
        guard !text.isEmpty else { return nil }
        guard let url = URL(string: text, relativeTo: baseURL)?.absoluteURL, url.scheme != nil else {
            throw HotUpdateError(.manifestInvalid, "\(what) '\(text)' is not a URL", packageID: id)
        }
        return url
    }

    private static func optionalMD5(_ text: String, what: String, id: String) throws -> Digest? {
        guard !text.isEmpty else { return nil }
        do {
            return try Digest(algorithm: .md5, hex: text)
        } catch {
            throw HotUpdateError(
                .manifestInvalid,
                "\(what) '\(text)' is not 32 hex digits",
                packageID: id,
                cause: SendableErrorBox(error)
            )
        }
    }

    // MARK: - The answer's JSON, read leniently where servers differ

    private struct Answer: Decodable {
        var resultData: [AnswerModule]?
    }

    private struct AnswerModule: Decodable {
        var moduleId: Scalar?
        var moduleVer: Scalar?
        var packageUrl: String?
        var packageMD5: String?
        var patchUrl: String?
        var patchMD5: String?
        var mode: Scalar?
        var isActive: Scalar?
    }

    /// A JSON string, number or boolean, kept as text (servers send `"10010"` and `10010`,
    /// `true` and `1`).
    private struct Scalar: Decodable {
        var value: String

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            if let bool = try? container.decode(Bool.self) {
                value = bool ? "true" : "false"
            } else if let int = try? container.decode(Int64.self) {
                value = String(int)
            } else {
                value = try container.decode(String.self)
            }
        }

        func bool(what: String, packageID: String) throws -> Bool {
            switch value.lowercased() {
            case "true", "1": return true
            case "false", "0": return false
            default:
                throw HotUpdateError(.manifestInvalid, "\(what) '\(value)' is not a boolean", packageID: packageID)
            }
        }
    }
}
