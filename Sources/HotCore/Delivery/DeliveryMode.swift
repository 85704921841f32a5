/// When a package is downloaded: before first use, in the background, or only when the app
/// asks for it. Set per package in the signed manifest (`hot pack --delivery`,
/// `hot release --delivery`).
///
/// A struct with static members rather than an enum, so new modes can be added without
/// breaking a `switch` in user code. A mode this client does not know is treated as
/// ``prefetch``: what clients did before modes existed.
///
/// - ``launch``: needed before first use. A sync fetches it ahead of every other package, and
///   the app can wait for it with a timeout (``Updater/waitForLaunchPackages(timeout:)``),
///   using its bundled copy when the wait ends.
/// - ``prefetch``: the default. A sync fetches it in the background, after launch packages.
/// - ``onDemand``: a sync never fetches it until the app asks for it once
///   (``Updater/install(id:)``); from then on every sync keeps it current, until a storage
///   budget evicts it (``Updater/evictOnDemandPacks(budget:)``).
///
/// ```swift
/// let filters = try await updater.install(id: "filters-vintage")   // downloaded on first ask
/// ```
public struct DeliveryMode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The mode's name as the manifest writes it.
    public let rawValue: String
    /// Creates a mode from its name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Needed before first use: fetched first, waited for at launch (with a timeout).
    public static let launch = DeliveryMode(rawValue: "launch")
    /// Fetched in the background by every sync; the default.
    public static let prefetch = DeliveryMode(rawValue: "prefetch")
    /// Fetched only once the app asks for it; kept current from then on; evictable.
    public static let onDemand = DeliveryMode(rawValue: "on-demand")

    /// The modes this version of HotUpdate knows.
    public static let known: [DeliveryMode] = [.launch, .prefetch, .onDemand]

    /// The mode a client acts on: `self` when known, else ``prefetch``.
    public var effective: DeliveryMode { Self.known.contains(self) ? self : .prefetch }

    public init(from decoder: any Decoder) throws {
        rawValue = try decoder.singleValueContainer().decode(String.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    public var description: String { rawValue }
}
