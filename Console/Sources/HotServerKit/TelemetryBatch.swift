import Foundation
import HotCore

/// One batch as `HTTPTelemetryReporter` posts it, checked: every field within its bounds.
public struct TelemetryBatch: Sendable, Hashable {
    /// The batch's id: the same when the reporter sends it again.
    public var id: String
    /// The reporter's per-install random id.
    public var client: String
    /// The channel the app follows; empty when it sent none.
    public var channel: String
    /// The app's version; empty when it sent none.
    public var appVersion: String
    /// When the reporter built the batch.
    public var sentAt: Date
    /// The events, in order.
    public var events: [TelemetryEvent]

    /// Creates a batch (tests and the benchmark build rows this way).
    public init(
        id: String,
        client: String,
        channel: String = "",
        appVersion: String = "",
        sentAt: Date,
        events: [TelemetryEvent]
    ) {
        self.id = id
        self.client = client
        self.channel = channel
        self.appVersion = appVersion
        self.sentAt = sentAt
        self.events = events
    }
}

/// Why a batch was refused: the collector answers its status with ``reason`` as the body and
/// stores nothing of the batch.
public struct BatchRejection: Error, Sendable, Hashable, CustomStringConvertible {
    /// The HTTP status: 400 (malformed), 413 (too large), 415 (not JSON), 429 (rate limit).
    public var status: Int
    /// What is wrong, for the client's logs.
    public var reason: String

    /// Creates a rejection.
    public init(_ status: Int, _ reason: String) {
        self.status = status
        self.reason = reason
    }

    public var description: String { "\(status): \(reason)" }
}

/// The limits a batch is checked against.
public struct BatchLimits: Sendable, Hashable {
    /// The most bytes of a request body.
    public var maxBodyBytes = 256 * 1024
    /// The most events in one batch.
    public var maxEvents = 1000
    /// How far in the past an event's date may be.
    public var maxAge: TimeInterval = 30 * 86_400
    /// How far in the future an event's date may be (clock skew).
    public var maxSkew: TimeInterval = 86_400

    /// The defaults: 256 KiB, 1000 events, 30 days back, one day ahead.
    public init() {}
}

extension TelemetryBatch {
    /// The event kinds a collector stores.
    public static let knownKinds: Set<String> = [
        "check", "download", "install", "confirm", "rollback", "block", "heal",
    ]

    /// Decodes and checks a request body.
    ///
    /// - Parameters:
    ///   - body: The bytes posted.
    ///   - limits: The bounds.
    ///   - now: The collector's time, for the date bounds.
    /// - Throws: ``BatchRejection`` with the first thing wrong.
    public static func parse(
        _ body: Data,
        limits: BatchLimits = BatchLimits(),
        now: Date = Date()
    ) throws
        -> TelemetryBatch
    {
        guard body.count <= limits.maxBodyBytes else {
            throw BatchRejection(413, "the batch is \(body.count) bytes, over the limit of \(limits.maxBodyBytes)")
        }
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: body)
        } catch {
            throw BatchRejection(400, "the body is not JSON")
        }
        guard let root = object as? [String: Any] else { throw BatchRejection(400, "the body is not a JSON object") }
        let allowed: Set<String> = ["batch", "client", "channel", "appVersion", "sentAt", "events"]
        if let unknown = root.keys.first(where: { !allowed.contains($0) }) {
            throw BatchRejection(400, "unknown field '\(unknown)'")
        }
        let id = try uuid(root["batch"], "batch")
        let client = try uuid(root["client"], "client")
        let channel = try optionalText(root["channel"], "channel", pattern: componentCharacters, max: 64) ?? ""
        let appVersion = try optionalText(root["appVersion"], "appVersion", pattern: versionCharacters, max: 64) ?? ""
        let sentAt = try date(root["sentAt"], "sentAt", limits: limits, now: now)
        guard let events = root["events"] as? [Any] else { throw BatchRejection(400, "'events' is not a list") }
        guard !events.isEmpty else { throw BatchRejection(400, "'events' is empty") }
        guard events.count <= limits.maxEvents else {
            throw BatchRejection(413, "\(events.count) events, over the limit of \(limits.maxEvents)")
        }
        let parsed = try events.enumerated().map { index, value in
            do {
                return try event(value, limits: limits, now: now)
            } catch let rejection as BatchRejection {
                throw BatchRejection(rejection.status, "event \(index): \(rejection.reason)")
            }
        }
        return TelemetryBatch(
            id: id,
            client: client,
            channel: channel,
            appVersion: appVersion,
            sentAt: sentAt,
            events: parsed
        )
    }

    private static let componentCharacters = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-"
    )
    private static let versionCharacters = CharacterSet(
        charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._+-"
    )

    private static func event(_ value: Any, limits: BatchLimits, now: Date) throws -> TelemetryEvent {
        guard let fields = value as? [String: Any] else { throw BatchRejection(400, "not a JSON object") }
        let allowed: Set<String> = [
            "kind", "date", "packageID", "version", "manifestVersion", "bytes", "delivery", "restoredVersion",
            "errorCode",
        ]
        if let unknown = fields.keys.first(where: { !allowed.contains($0) }) {
            throw BatchRejection(400, "unknown field '\(unknown)'")
        }
        guard let kind = fields["kind"] as? String, knownKinds.contains(kind) else {
            throw BatchRejection(400, "'kind' is not one of \(knownKinds.sorted().joined(separator: ", "))")
        }
        let date = try date(fields["date"], "date", limits: limits, now: now)
        let packageID = try optionalText(fields["packageID"], "packageID", pattern: componentCharacters, max: 128)
        let version = try optionalText(fields["version"], "version", pattern: versionCharacters, max: 64)
        let restored = try optionalText(
            fields["restoredVersion"],
            "restoredVersion",
            pattern: versionCharacters,
            max: 64
        )
        let errorCode = try optionalText(fields["errorCode"], "errorCode", pattern: componentCharacters, max: 64)
        if kind != "check" {
            guard packageID != nil, version != nil else {
                throw BatchRejection(400, "a \(kind) event names its packageID and version")
            }
        }
        var manifestVersion: Int?
        if let value = fields["manifestVersion"] {
            guard let number = value as? NSNumber, !isBoolean(number),
                number.doubleValue == number.doubleValue.rounded(),
                number.int64Value >= 0, number.int64Value <= Int64(Int32.max)
            else { throw BatchRejection(400, "'manifestVersion' is not a whole number") }
            manifestVersion = number.intValue
        }
        var bytes: Int64?
        if let value = fields["bytes"] {
            guard let number = value as? NSNumber, !isBoolean(number),
                number.doubleValue == number.doubleValue.rounded(),
                number.int64Value >= 0, number.int64Value < 1 << 50
            else { throw BatchRejection(400, "'bytes' is not a whole number of bytes") }
            bytes = number.int64Value
        }
        var delivery: TelemetryEvent.Delivery?
        if let value = fields["delivery"] {
            guard let text = value as? String, let parsed = TelemetryEvent.Delivery(rawValue: text) else {
                throw BatchRejection(400, "'delivery' is full or delta")
            }
            delivery = parsed
        }
        return TelemetryEvent(
            kind: TelemetryEvent.Kind(rawValue: kind),
            date: date,
            packageID: packageID,
            version: version,
            manifestVersion: manifestVersion,
            bytes: bytes,
            delivery: delivery,
            restoredVersion: restored,
            errorCode: errorCode
        )
    }

    private static func isBoolean(_ number: NSNumber) -> Bool {
        // JSON's true and false arrive as NSNumbers of type char.
        String(cString: number.objCType) == "c"
    }

    private static func uuid(_ value: Any?, _ name: String) throws -> String {
        guard let text = value as? String, text.count == 36, let parsed = UUID(uuidString: text) else {
            throw BatchRejection(400, "'\(name)' is not a UUID")
        }
        return parsed.uuidString.lowercased()
    }

    private static func optionalText(_ value: Any?, _ name: String, pattern: CharacterSet, max: Int) throws -> String? {
        guard let value, !(value is NSNull) else { return nil }
        guard let text = value as? String, !text.isEmpty, text.utf8.count <= max,
            text.unicodeScalars.allSatisfy({ pattern.contains($0) })
        else {
            throw BatchRejection(400, "'\(name)' is not 1 to \(max) letters, digits, '.', '_' or '-'")
        }
        return text
    }

    private static func date(_ value: Any?, _ name: String, limits: BatchLimits, now: Date) throws -> Date {
        guard let text = value as? String, text.count <= 40, let date = parseDate(text) else {
            throw BatchRejection(400, "'\(name)' is not an ISO 8601 time")
        }
        guard date >= now.addingTimeInterval(-limits.maxAge), date <= now.addingTimeInterval(limits.maxSkew) else {
            throw BatchRejection(400, "'\(name)' \(text) is out of bounds")
        }
        return date
    }

    // Made once: an ISO8601DateFormatter per date was most of a batch's parse time.
    private static let plainDate = Date.ISO8601FormatStyle()
    private static let fractionalDate = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    private static func parseDate(_ text: String) -> Date? {
        (try? plainDate.parse(text)) ?? (try? fractionalDate.parse(text))
    }
}
