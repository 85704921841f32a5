import ArgumentParser
import Foundation
import HotArchive
import HotAssets
import HotCore
import HotStore
import HotTransport
import HotUpdate
import HotVerify
import Logging

/// Which transport `hot sync` uses.
enum TransportKind: String, ExpressibleByArgument, CaseIterable {
    case curl, urlsession, file

    /// The default for a URL: `file` for file URLs; `curl` for others where this build links
    /// libcurl, `urlsession` where it does not.
    static func defaultKind(for url: URL) -> TransportKind {
        url.isFileURL ? .file : defaultHTTP
    }

    /// The HTTP transport used unless one is named.
    static var defaultHTTP: TransportKind {
        #if Curl && canImport(CHotCurl)
        return .curl
        #else
        return .urlsession
        #endif
    }

    /// Why `--transport curl` is refused in a build without libcurl.
    static let missing =
        "the curl transport is not in this build of hot: build it with the package trait 'Curl' "
        + "(on by default), or use --transport urlsession"

    /// The transport, trusting what `trust` says over TLS (file URLs speak no TLS).
    ///
    /// - Throws: A one-line error when the transport cannot honour `trust` on this platform
    ///   (URLSession over FoundationNetworking takes no CA file or pin), before any request.
    func make(trust: TLSTrust = .system) throws -> any Transport {
        switch self {
        case .curl:
            #if Curl && canImport(CHotCurl)
            return try CurlTransport(trust: trust)
            #else
            throw ValidationError(Self.missing)
            #endif
        case .urlsession:
            do {
                return try URLSessionTransport(trust: trust)
            } catch let error as HotUpdateError where error.code == .unsupported {
                throw HotUpdateError(
                    .unsupported,
                    "--transport urlsession cannot use --ca-file or --pin on this platform "
                        + "(FoundationNetworking has no server-trust hook); use --transport curl"
                )
            }
        case .file: return FileTransport()
        }
    }
}

/// Which unarchiver is used.
enum UnarchiverKind: String, ExpressibleByArgument, CaseIterable {
    case zip, libarchive

    /// Why `--unarchiver libarchive` is refused in a build without libarchive.
    static let missing =
        "the libarchive unarchiver is not in this build of hot: build it with the package trait 'LibArchive' "
        + "(on by default), or use --unarchiver zip"

    func make() throws -> any Unarchiver {
        switch self {
        case .zip: return ZipUnarchiver()
        case .libarchive:
            #if LibArchive && canImport(CHotArchive)
            return LibArchiveUnarchiver()
            #else
            throw ValidationError(Self.missing)
            #endif
        }
    }
}

/// Which metadata store is used.
enum StoreKind: String, ExpressibleByArgument, CaseIterable {
    case json, plist

    func make(root: URL) -> any MetadataStore {
        switch self {
        case .json: return FileMetadataStore(root: root)
        case .plist: return FileMetadataStore(root: root, format: .propertyList)
        }
    }

    /// The kind already used at `root`: plist when only `store.plist` exists, else JSON.
    static func detect(root: URL) -> StoreKind {
        let fileManager = FileManager.default
        if !fileManager.fileExists(atPath: root.appendingPathComponent("store.json").path),
            fileManager.fileExists(atPath: root.appendingPathComponent("store.plist").path)
        {
            return .plist
        }
        return .json
    }
}

/// Options shared by the commands that open a store.
struct StoreOptions: ParsableArguments {
    @Option(name: .long, help: "The store root directory.")
    var root: String

    @Option(name: .long, help: "The metadata store format; detected when omitted.")
    var store: StoreKind?

    @Flag(name: .long, help: "Log what the engine does on stderr.")
    var verbose = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "How long a change waits while another process holds the store lock before it gives up; reads never wait more than half a second.",
            valueName: "seconds"
        )
    )
    var lockTimeout: Double = 10

    var rootURL: URL { directoryURL(root) }

    /// How this command waits for another process's hold on the store lock: the holder is
    /// named on stderr after a second, whatever the log level, and a change gives up after
    /// `--lock-timeout`.
    var lockWait: StoreLockWait {
        StoreLockWait(timeout: max(0, lockTimeout)) { holder in
            FileHandle.standardError.write(Data("hot: waiting for the store lock, held by \(holder)\n".utf8))
        }
    }

    /// Throws "no store at …" when the root is not a directory: commands that only read
    /// a store never create one.
    func requireStore() throws {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: rootURL.path, isDirectory: &isDirectory), isDirectory.boolValue
        else {
            throw HotUpdateError(.notFound, "no store at \(rootURL.path)")
        }
    }

    /// A logger on stderr: debug with --verbose, else only critical messages, or warnings too.
    func makeLogger(warnings: Bool = false) -> Logger {
        var logger = Logger(label: "hot", factory: { StreamLogHandler.standardError(label: $0) })
        logger.logLevel = verbose ? .debug : (warnings ? .warning : .critical)
        return logger
    }

    /// Builds an updater over this root with the given parts.
    func makeUpdater(
        transport: any Transport = FileTransport(),
        unarchiver: any Unarchiver = ZipUnarchiver(),
        timeouts: TransportRequest.Timeouts = TransportRequest.Timeouts(),
        keepPreviousVersions: Int = 1,
        maxConcurrentPackages: Int = 2,
        maxPackageBytes: Int64 = UpdaterConfiguration.defaultMaxPackageBytes,
        quickCheckInterval: TimeInterval? = 86_400,
        network: NetworkOptions? = nil
    ) -> Updater {
        let kind = store ?? StoreKind.detect(root: rootURL)
        // The preset every app starts from, with the command's choices on top.
        var configuration = UpdaterConfiguration.standard(
            root: rootURL,
            transport: transport,
            store: kind.make(root: rootURL),
            maxPackageBytes: maxPackageBytes,
            logger: makeLogger()
        )
        configuration.unarchiver = unarchiver
        configuration.timeouts = timeouts
        configuration.maxConcurrentPackages = max(1, maxConcurrentPackages)
        configuration.keepPreviousVersions = max(0, keepPreviousVersions)
        configuration.lockWait = lockWait
        configuration.quickCheckInterval = quickCheckInterval
        if let network {
            configuration.network = network.policy
            configuration.initialNetwork = network.conditions
        }
        return Updater(configuration: configuration)
    }
}

/// The network a command assumes, and which downloads wait on a metered one.
struct NetworkOptions: ParsableArguments {
    @Flag(help: "Treat the network as metered (cellular): downloads above their delivery mode's limit wait.")
    var metered = false

    @Option(help: "On a metered network, the largest prefetch download in bytes (default 20 MiB).")
    var meteredPrefetchLimit: Int64?

    @Option(help: "On a metered network, the largest on-demand download in bytes (default 200 MiB).")
    var meteredOnDemandLimit: Int64?

    func validate() throws {
        for limit in [meteredPrefetchLimit, meteredOnDemandLimit].compactMap({ $0 }) where limit < 0 {
            throw ValidationError("a metered limit must not be negative")
        }
    }

    var conditions: NetworkConditions { metered ? .metered : .unmetered }

    var policy: NetworkPolicy {
        var policy = NetworkPolicy.standard
        if let meteredPrefetchLimit { policy.meteredLimits[.prefetch] = meteredPrefetchLimit }
        if let meteredOnDemandLimit { policy.meteredLimits[.onDemand] = meteredOnDemandLimit }
        return policy
    }
}
