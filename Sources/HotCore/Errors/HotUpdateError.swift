/// The one error type HotUpdate throws.
///
/// Match on ``code`` (equality compares codes only, so tests read well), show
/// ``description`` to people, and use ``detailedDescription()`` in logs: it
/// prints the chain of underlying causes.
///
/// ```swift
/// do {
///     try await updater.sync(from: source)
/// } catch let error as HotUpdateError where error.code == .digestMismatch {
///     logger.warning("\(error)")
/// }
/// ```
public struct HotUpdateError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is. New codes can be added without breaking
    /// a `switch` in user code, because `Code` is a struct, not an enum.
    public struct Code: Hashable, Sendable, CustomStringConvertible {
        private enum Value: String, Sendable {
            case invalidArgument
            case transportFailed
            case httpStatus
            case timedOut
            case byteLimitExceeded
            case truncated
            case sizeMismatch
            case digestMismatch
            case signatureInvalid
            case manifestRollback
            case manifestExpired
            case manifestInvalid
            case notAnArchive
            case corruptArchive
            case unsafeEntry
            case limitExceeded
            case unsupportedMethod
            case unsupportedEncryption
            case passwordRequired
            case wrongPassword
            case authenticationFailed
            case checksumMismatch
            case fileSystem
            case storeCorrupt
            case notFound
            case cancelled
            case superseded
            case unsupported
            case internalInconsistency
            case activationFailed
            case diskFull
            case launchFailed
            case storeBusy
            case manifestNotJSON
            case manifestTruncated
            case manifestTooDeep
            case manifestDuplicateKey
            case manifestNumberOutOfRange
            case notAManifest
            case manifestUnsigned
            case pathCollision
            case certificateUntrusted
            case certificateHostMismatch
            case certificateExpired
            case pinMismatch
            case insecureRedirect
            case waitingForNetwork
            case rolloutRoleExceeded
            case catalogUntrusted
            case treeOutsideStore
            case shardMismatch
            case timestampExpired
            case timestampMismatch
            case timestampMissing
            case timestampRollback
            case timestampRoleExceeded
            case timestampUnauthorized
        }
        private let value: Value
        private init(_ value: Value) { self.value = value }

        /// A caller passed something that can never work (a bad URL, an option out of range).
        public static let invalidArgument = Code(.invalidArgument)
        /// The transport could not complete a request (connection refused, DNS, TLS, reset).
        public static let transportFailed = Code(.transportFailed)
        /// The server answered with a status that is not a success.
        public static let httpStatus = Code(.httpStatus)
        /// A connect, low-speed or total timeout fired.
        public static let timedOut = Code(.timedOut)
        /// A body grew past the byte limit set on the request.
        public static let byteLimitExceeded = Code(.byteLimitExceeded)
        /// A body ended before the length the server or the manifest announced.
        public static let truncated = Code(.truncated)
        /// A downloaded package's size differs from the manifest's.
        public static let sizeMismatch = Code(.sizeMismatch)
        /// A downloaded package's digest differs from the manifest's.
        public static let digestMismatch = Code(.digestMismatch)
        /// A signature does not verify, or a key is unknown or malformed.
        public static let signatureInvalid = Code(.signatureInvalid)
        /// A signed manifest's version is lower than the highest this client has trusted, or
        /// the same version with other content (rollback and mix-and-match defence).
        public static let manifestRollback = Code(.manifestRollback)
        /// A signed manifest's expiry time has passed (freeze defence).
        public static let manifestExpired = Code(.manifestExpired)
        /// A manifest cannot be parsed or breaks a rule of its format.
        public static let manifestInvalid = Code(.manifestInvalid)
        /// The file is not an archive of a format the unarchiver reads (an empty file included).
        public static let notAnArchive = Code(.notAnArchive)
        /// The archive is damaged or inconsistent.
        public static let corruptArchive = Code(.corruptArchive)
        /// An entry would write outside the destination, or is a kind that is never created.
        public static let unsafeEntry = Code(.unsafeEntry)
        /// An extraction limit (bytes, entries, name length, compression ratio) was reached.
        public static let limitExceeded = Code(.limitExceeded)
        /// An entry uses a compression method this unarchiver does not read.
        public static let unsupportedMethod = Code(.unsupportedMethod)
        /// An entry uses an encryption scheme this unarchiver does not read.
        public static let unsupportedEncryption = Code(.unsupportedEncryption)
        /// An entry is encrypted and no password was given.
        public static let passwordRequired = Code(.passwordRequired)
        /// The password given does not decrypt an entry.
        public static let wrongPassword = Code(.wrongPassword)
        /// An encrypted entry's authentication code (WinZip AES's HMAC-SHA1) does not match its
        /// encrypted bytes: they were altered after they were encrypted (a wrong password whose
        /// verifier matches by chance, one in 65,536, ends here too).
        public static let authenticationFailed = Code(.authenticationFailed)
        /// An entry's CRC-32 does not match its data.
        public static let checksumMismatch = Code(.checksumMismatch)
        /// A file-system operation failed (permissions, missing directory); a full disk is
        /// ``diskFull``.
        public static let fileSystem = Code(.fileSystem)
        /// The metadata store cannot be read or is inconsistent.
        public static let storeCorrupt = Code(.storeCorrupt)
        /// A package, file or resource does not exist.
        public static let notFound = Code(.notFound)
        /// The work was cancelled.
        public static let cancelled = Code(.cancelled)
        /// A newer request for the package was made while this one ran (in this process or
        /// another one sharing the store), or the version a repair was for is no longer
        /// active: this one did not change the store.
        public static let superseded = Code(.superseded)
        /// The operation is not supported by this implementation or platform.
        public static let unsupported = Code(.unsupported)
        /// HotUpdate broke one of its own invariants; please report it.
        public static let internalInconsistency = Code(.internalInconsistency)
        /// An app's patch activation hook refused a patch.
        public static let activationFailed = Code(.activationFailed)
        /// The file system has no room left, or the user's quota is used up (`ENOSPC`,
        /// `EDQUOT`); the error names the file that could not be written.
        public static let diskFull = Code(.diskFull)
        /// A version of a guarded package was tried at a launch that never confirmed it (the
        /// process died, or the trial's time ran out): it was rolled back and blocked.
        public static let launchFailed = Code(.launchFailed)
        /// Another process held the store lock for longer than the wait allowed (see
        /// ``StoreLockWait``): the error names that process when the system tells. Nothing
        /// was changed; try again later.
        public static let storeBusy = Code(.storeBusy)
        /// What was served as a manifest is not JSON (an HTML error page, say), or has bytes
        /// after the document; the message shows its first bytes, escaped.
        public static let manifestNotJSON = Code(.manifestNotJSON)
        /// The manifest ends inside a value: it was cut short.
        public static let manifestTruncated = Code(.manifestTruncated)
        /// The manifest nests deeper than its reader allows (64 levels).
        public static let manifestTooDeep = Code(.manifestTooDeep)
        /// An object in the manifest has a key twice, at any depth: parsers differ on which
        /// value counts, so it is refused before any signature is checked.
        public static let manifestDuplicateKey = Code(.manifestDuplicateKey)
        /// A number in the manifest is not an integer every parser reads exactly (a fraction,
        /// an exponent, or beyond ±(2^53 − 1)).
        public static let manifestNumberOutOfRange = Code(.manifestNumberOutOfRange)
        /// The document is JSON but no manifest: neither a signed envelope nor a schema-1
        /// document.
        public static let notAManifest = Code(.notAManifest)
        /// The manifest carries no signature, and the client accepts only signed ones.
        public static let manifestUnsigned = Code(.manifestUnsigned)
        /// Two paths of a package, or two package ids, are one name on some file system: equal
        /// after Unicode normalisation, or after case folding (the rule `hot pack` applies); or a
        /// package for case-sensitive file systems only meets a store on a volume that ignores
        /// case.
        public static let pathCollision = Code(.pathCollision)
        /// The server's TLS certificate does not chain to a trusted certificate authority (an
        /// unknown or private CA whose bundle was not given, a self-signed certificate).
        public static let certificateUntrusted = Code(.certificateUntrusted)
        /// The server's TLS certificate is valid but names another host than the URL's.
        public static let certificateHostMismatch = Code(.certificateHostMismatch)
        /// The server's TLS certificate (or one of its chain) has expired or is not valid yet.
        public static let certificateExpired = Code(.certificateExpired)
        /// No public key of the server's certificate chain matches a pinned SPKI SHA-256
        /// (`sha256//BASE64`): the connection was refused before any byte of the request.
        public static let pinMismatch = Code(.pinMismatch)
        /// An `https` request was redirected to plain `http` (a downgrade), and refused.
        public static let insecureRedirect = Code(.insecureRedirect)
        /// The package is larger than the network policy lets through on a metered or
        /// constrained network (see `NetworkPolicy`): it is downloaded once the network is
        /// unmetered. Not a failure of the package.
        public static let waitingForNetwork = Code(.waitingForNetwork)
        /// A manifest's rollout part, signed by the rollout role the release keys delegate to,
        /// changes something that role may not: a package the release does not list, a
        /// release it does not name, an expiry past the role's bound, a version more than the
        /// role's `maxVersionLead` above its release, or a release manifest other than its own
        /// (see `RolloutRole`).
        public static let rolloutRoleExceeded = Code(.rolloutRoleExceeded)
        /// The store's catalog of offered packages (`catalog.json`) is not the one its last
        /// trusted manifest wrote: its SHA-256 differs from the one the store recorded in the
        /// same commit, or none was recorded. Nothing is installed from it; a sync writes it
        /// again.
        public static let catalogUntrusted = Code(.catalogUntrusted)
        /// An installed version's directory, or a directory above or inside it under the
        /// store root, is not a real directory (a symbolic link, perhaps to a directory
        /// outside the store, or another kind of file): nothing is read through it, and a
        /// sync removes it and puts the tree back.
        public static let treeOutsideStore = Code(.treeOutsideStore)
        /// A shard of a sharded manifest (one bin of its packages) differs from what the signed
        /// manifest names for it: another SHA-256 or length (the download is cut at the named
        /// length), another bin, another number of packages, a package filed under the wrong bin
        /// or listed twice. Nothing from the manifest is used.
        public static let shardMismatch = Code(.shardMismatch)
        /// A channel's timestamp (`timestamp.json`, the small signed document that names the
        /// current manifest) has expired, checked against the later of the device's clock and
        /// the newest release signing time this client accepted; a `304 Not Modified` answer
        /// for a kept timestamp included (freeze defence).
        public static let timestampExpired = Code(.timestampExpired)
        /// The manifest served differs from the one the timestamp names: another SHA-256, length,
        /// version or channel. Nothing from it is used.
        public static let timestampMismatch = Code(.timestampMismatch)
        /// The release manifest declares a timestamp role, so every check needs a timestamp, and
        /// none was served beside it.
        public static let timestampMissing = Code(.timestampMissing)
        /// The timestamp names a manifest version lower than the one this client trusts: an
        /// older timestamp replayed. Refused before the manifest is downloaded.
        public static let timestampRollback = Code(.timestampRollback)
        /// The timestamp was signed before its release manifest, or expires past the bound the
        /// release keys set for the timestamp role (`OnlineRoleBounds`).
        public static let timestampRoleExceeded = Code(.timestampRoleExceeded)
        /// The timestamp is not signed by a threshold of the keys the release manifest
        /// delegates timestamps to: its timestamp role, or its release keys when it declares
        /// none.
        public static let timestampUnauthorized = Code(.timestampUnauthorized)

        public var description: String { value.rawValue }
    }

    /// What kind of failure this is.
    public var code: Code
    /// What failed and why, in one sentence for a person.
    public var message: String
    /// The package the failure concerns, when there is one.
    public var packageID: String?
    /// The file, archive entry or URL the failure concerns, when there is one.
    public var subject: String?
    /// The error that caused this one, if any.
    public var cause: (any Error & Sendable)?
    /// Where in HotUpdate the error was raised.
    public var location: SourceLocation

    /// Where an error was raised.
    public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
        /// The source file (`#fileID`).
        public var file: String
        /// The line in that file.
        public var line: Int
        /// Creates a location.
        public init(file: String, line: Int) {
            self.file = file
            self.line = line
        }
        public var description: String { "\(file):\(line)" }
    }

    /// Creates an error.
    ///
    /// - Parameters:
    ///   - code: What kind of failure this is.
    ///   - message: What failed and why, for a person.
    ///   - packageID: The package concerned, if any.
    ///   - subject: The file, entry or URL concerned, if any.
    ///   - cause: The underlying error, if any.
    ///   - file: The source file that throws; the caller's by default.
    ///   - line: The line that throws; the caller's by default.
    public init(
        _ code: Code,
        _ message: String,
        packageID: String? = nil,
        subject: String? = nil,
        cause: (any Error & Sendable)? = nil,
        file: String = #fileID,
        line: Int = #line
    ) {
        self.code = code
        self.message = message
        self.packageID = packageID
        self.subject = subject
        self.cause = cause
        self.location = SourceLocation(file: file, line: line)
    }

    /// Errors are equal when their codes are.
    public static func == (lhs: HotUpdateError, rhs: HotUpdateError) -> Bool {
        lhs.code == rhs.code
    }

    /// One line: `[package] subject: message`.
    public var description: String {
        var text = ""
        if let packageID { text += "package \(packageID): " }
        if let subject { text += "\(subject): " }
        text += message
        return text
    }

    /// The description followed by every underlying cause, one per line, with
    /// the code and the source location of each.
    public func detailedDescription() -> String {
        var lines = ["\(description) [\(code) at \(location)]"]
        var next: (any Error)? = cause
        var depth = 1
        while let current = next, depth < 16 {
            let indent = String(repeating: "  ", count: depth)
            if let hot = current as? HotUpdateError {
                lines.append("\(indent)caused by: \(hot.description) [\(hot.code) at \(hot.location)]")
                next = hot.cause
            } else {
                lines.append("\(indent)caused by: \(String(describing: current))")
                next = nil
            }
            depth += 1
        }
        return lines.joined(separator: "\n")
    }

    /// Returns a copy that names the package concerned.
    public func forPackage(_ id: String) -> HotUpdateError {
        var copy = self
        if copy.packageID == nil { copy.packageID = id }
        return copy
    }

    /// Wraps any error as a ``HotUpdateError``: a `HotUpdateError` passes through,
    /// `CancellationError` becomes ``Code/cancelled``, a Foundation or POSIX error that says
    /// the disk is full becomes ``Code/diskFull``, anything else becomes `fallback`.
    public static func wrap(
        _ error: any Error,
        as fallback: Code,
        _ message: @autoclosure () -> String,
        packageID: String? = nil,
        file: String = #fileID,
        line: Int = #line
    ) -> HotUpdateError {
        if let hot = error as? HotUpdateError {
            return packageID.map { hot.forPackage($0) } ?? hot
        }
        if error is CancellationError {
            return HotUpdateError(.cancelled, "cancelled", packageID: packageID, file: file, line: line)
        }
        if isDiskFull(error) {
            return HotUpdateError(
                .diskFull,
                "\(message()): disk full (\(error))",
                packageID: packageID,
                cause: SendableErrorBox(error),
                file: file,
                line: line
            )
        }
        return HotUpdateError(
            fallback,
            "\(message()): \(error)",
            packageID: packageID,
            cause: SendableErrorBox(error),
            file: file,
            line: line
        )
    }
}

/// Carries a non-`Sendable` error's description across concurrency domains.
package struct SendableErrorBox: Error, Sendable, CustomStringConvertible {
    /// The wrapped error's description.
    package let description: String
    /// Boxes `error`.
    package init(_ error: any Error) { self.description = String(describing: error) }
}
