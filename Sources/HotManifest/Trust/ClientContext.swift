import Foundation
import HotCore
import Logging

/// Who this client is, for the publisher's per-package policy: which app version runs,
/// which stable id decides its staged-rollout bucket, and which channel it follows.
///
/// ```swift
/// let context = ClientContext(appVersion: "5.3.1", clientID: installationID, channel: "production")
/// ```
public struct ClientContext: Sendable, Hashable {
    /// The app's version, dotted numbers (`5.3.1`), compared with `minAppVersion` and `maxAppVersion`.
    public var appVersion: String?
    /// A stable id of this installation (not of the user). The rollout bucket is derived from
    /// it, so the same client always lands in the same bucket for the same release.
    public var clientID: String
    /// The channel the client follows; must equal the manifest's `channel`.
    public var channel: String?

    /// Creates a context.
    ///
    /// - Parameters:
    ///   - appVersion: The app's version; nil skips the app-version checks.
    ///   - clientID: A stable installation id, such as a UUID stored on first launch.
    ///   - channel: The channel this client follows, or nil for a repository with one manifest.
    public init(appVersion: String? = nil, clientID: String = "", channel: String? = nil) {
        self.appVersion = appVersion
        self.clientID = clientID
        self.channel = channel
    }
}

/// Dotted version numbers compared component by component: `5.10` is above `5.9`,
/// `5.2` equals `5.2.0`. A component that is not a number compares as text.
public struct AppVersion: Comparable, Sendable, Hashable, CustomStringConvertible {
    /// The version as written.
    public let text: String
    private let components: [String]

    /// Creates a version from its text.
    public init(_ text: String) {
        self.text = text
        var parts = text.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        while parts.count > 1, parts.last.map({ Int($0) == 0 }) == true { parts.removeLast() }
        self.components = parts
    }

    public var description: String { text }

    public static func == (lhs: AppVersion, rhs: AppVersion) -> Bool { lhs.components == rhs.components }

    public func hash(into hasher: inout Hasher) { hasher.combine(components) }

    public static func < (lhs: AppVersion, rhs: AppVersion) -> Bool {
        for index in 0..<max(lhs.components.count, rhs.components.count) {
            let left = index < lhs.components.count ? lhs.components[index] : "0"
            let right = index < rhs.components.count ? rhs.components[index] : "0"
            if left == right { continue }
            if let l = Int(left), let r = Int(right) { return l < r }
            return left < right
        }
        return false
    }
}

/// Applies a signed manifest's per-package policy to one client: which version it gets,
/// and which packages it must stop using.
///
/// For each package, in order: disabled by the publisher → disabled; the app version
/// outside `minAppVersion`…`maxAppVersion` → disabled; a staged rollout whose bucket this
/// client is not in → the previous release (disabled when there is none); otherwise the
/// current release. A package with no release is disabled.
public struct ReleasePolicy: Sendable {
    /// The client the policy is applied for.
    public var context: ClientContext
    /// Hashes the rollout bucket.
    public var verifier: any Verifier

    /// Creates a policy evaluator.
    public init(context: ClientContext, verifier: any Verifier) {
        self.context = context
        self.verifier = verifier
    }

    /// The bucket, 0–99, of this client for a release: the first eight bytes of
    /// SHA-256(`clientID` LF `packageID` LF `version`) as a big-endian integer, modulo 100.
    /// A client is in a rollout of `p` percent when its bucket is below `p`.
    ///
    /// - Throws: `HotUpdateError.Code.unsupported` when the verifier lacks SHA-256.
    public func bucket(packageID: String, version: String) throws -> Int {
        let digest = try verifier.digest(of: Data("\(context.clientID)\n\(packageID)\n\(version)".utf8), using: .sha256)
        let value = digest.bytes.prefix(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        return Int(value % 100)
    }

    /// Which version of `package` this client gets, or nil when it must not use the package.
    ///
    /// - Returns: The version entry and, when nil, why (for the log).
    /// - Throws: `HotUpdateError.Code.manifestInvalid` when a release is not among the versions.
    public func choose(_ package: SignedManifestBody.Package) throws -> (SignedManifestBody.Version?, String) {
        if package.disabled { return (nil, "disabled by the publisher") }
        if let appVersion = context.appVersion.map(AppVersion.init) {
            if let minimum = package.minAppVersion, appVersion < AppVersion(minimum) {
                return (nil, "app version \(appVersion) is below the minimum \(minimum)")
            }
            if let maximum = package.maxAppVersion, AppVersion(maximum) < appVersion {
                return (nil, "app version \(appVersion) is above the maximum \(maximum)")
            }
        }
        guard let current = package.current else { return (nil, "no release") }
        var chosen = current
        if let percent = package.rollout, percent < 100 {
            let bucket = try bucket(packageID: package.id, version: current)
            if bucket >= percent {
                guard let previous = package.previous else {
                    return (nil, "bucket \(bucket) is outside the \(percent)% rollout of \(current)")
                }
                chosen = previous
            }
        }
        guard let entry = package.entry(for: chosen) else {
            throw HotUpdateError(
                .manifestInvalid,
                "release \(chosen) is not among the package's versions",
                packageID: package.id
            )
        }
        return (entry, "")
    }

    /// The manifest this client acts on.
    ///
    /// - Parameters:
    ///   - body: The verified signed part.
    ///   - baseURL: The manifest's URL, against which package URLs resolve.
    ///   - logger: Where to say why a package is not used, if anywhere.
    /// - Throws: `HotUpdateError.Code.manifestInvalid` for a bad entry.
    public func manifest(
        for body: SignedManifestBody,
        relativeTo baseURL: URL,
        logger: Logger? = nil
    ) throws
        -> Manifest
    {
        var offered: [PackageDescriptor] = []
        var disabled = Set<String>()
        for package in body.packages {
            try PackageDescriptor.validateComponent(package.id, what: "package id")
            let (chosen, reason) = try choose(package)
            guard let chosen else {
                logger?.info("not using the package: \(reason)", metadata: ["package": "\(package.id)"])
                disabled.insert(package.id)
                continue
            }
            offered.append(try chosen.descriptor(id: package.id, delivery: package.delivery, relativeTo: baseURL))
        }
        return try Manifest(
            schema: body.schema,
            version: body.version,
            packages: offered,
            isComplete: true,
            disabledPackageIDs: disabled
        )
    }
}
