import Foundation
import HotCore
import HotManifest

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
    /// The events, in order: those that were right.
    public var events: [TelemetryEvent]
    /// The events left out because they were wrong (``parse(_:limits:)`` fills it).
    public var refused: [RefusedEvent] = []

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

/// An event of a batch the collector refused while it stored the others.
public struct RefusedEvent: Sendable, Hashable, Codable {
    /// Its position in the batch's `events`, from 0.
    public var index: Int
    /// What is wrong with it.
    public var reason: String

    /// Creates an entry.
    public init(index: Int, reason: String) {
        self.index = index
        self.reason = reason
    }
}

/// The limits a batch is checked against.
public struct BatchLimits: Sendable, Hashable {
    /// The most bytes of a request body.
    public var maxBodyBytes = 256 * 1024
    /// The most events in one batch.
    public var maxEvents = 1000

    /// The defaults: 256 KiB, 1000 events.
    public init() {}
}

extension TelemetryBatch {
    /// The event kinds a collector stores.
    public static let knownKinds: Set<String> = [
        "check", "download", "install", "confirm", "rollback", "block", "heal", "defer", "refuse",
    ]

    /// Decodes and checks a request body.
    ///
    /// The batch's own fields must all be right, or the whole batch is refused. An event
    /// that is wrong is left out and listed in ``refused``; the others are kept. Device
    /// dates are kept whatever they are (device clocks are often wrong): the collector
    /// records its own receipt time beside them.
    ///
    /// - Parameters:
    ///   - body: The bytes posted.
    ///   - limits: The bounds.
    /// - Throws: ``BatchRejection`` with the first thing wrong with the batch, or every
    ///   event's fault when none is right.
    public static func parse(_ body: Data, limits: BatchLimits = BatchLimits()) throws -> TelemetryBatch {
        guard body.count <= limits.maxBodyBytes else {
            throw BatchRejection(413, "the batch is \(body.count) bytes, over the limit of \(limits.maxBodyBytes)")
        }
        do {
            // A key twice, or an integer past 2^53: parsers differ on what such a document says.
            try StrictJSONDocument.check(body, what: "the batch")
        } catch let error as HotUpdateError {
            throw BatchRejection(400, error.message)
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
        let channel = try component(root["channel"], "channel") ?? ""
        let appVersion = try appVersion(root["appVersion"]) ?? ""
        let sentAt = try date(root["sentAt"], "sentAt")
        guard let events = root["events"] as? [Any] else { throw BatchRejection(400, "'events' is not a list") }
        guard !events.isEmpty else { throw BatchRejection(400, "'events' is empty") }
        guard events.count <= limits.maxEvents else {
            throw BatchRejection(413, "\(events.count) events, over the limit of \(limits.maxEvents)")
        }
        var parsed: [TelemetryEvent] = []
        parsed.reserveCapacity(events.count)
        var refused: [RefusedEvent] = []
        for (index, value) in events.enumerated() {
            do {
                parsed.append(try event(value))
            } catch let rejection as BatchRejection {
                refused.append(RefusedEvent(index: index, reason: rejection.reason))
            }
        }
        guard !parsed.isEmpty else {
            throw BatchRejection(
                400,
                "no event is right: "
                    + refused.prefix(5).map { "event \($0.index): \($0.reason)" }.joined(separator: "; ")
            )
        }
        var batch = TelemetryBatch(
            id: id,
            client: client,
            channel: channel,
            appVersion: appVersion,
            sentAt: sentAt,
            events: parsed
        )
        batch.refused = refused
        return batch
    }

    /// Which bytes a package id, a version or a channel may hold: the library's own rule
    /// (`PackageDescriptor.validateComponent`): `A–Z a–z 0–9 . _ - + ~`.
    private static let componentBytes: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-+~".utf8 {
            table[Int(byte)] = true
        }
        return table
    }()

    /// Which bytes an error code may hold.
    private static let codeBytes: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for byte in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-".utf8 { table[Int(byte)] = true }
        return table
    }()

    /// A package id, version or channel: nil when absent; else what the library accepts
    /// (1–128 bytes of ``componentBytes``, not `.` or `..`), or a refusal.
    private static func component(_ value: Any?, _ name: String) throws -> String? {
        guard let value, !(value is NSNull) else { return nil }
        guard let text = value as? String, !text.isEmpty, text.utf8.count <= 128, text != ".", text != "..",
            text.utf8.allSatisfy({ componentBytes[Int($0)] })
        else {
            throw BatchRejection(400, "'\(name)' is not 1 to 128 letters, digits, '.', '_', '-', '+' or '~'")
        }
        return text
    }

    /// The app's version: any text the app gives (spaces included), 1 to 256 bytes, without
    /// control characters.
    private static func appVersion(_ value: Any?) throws -> String? {
        guard let value, !(value is NSNull) else { return nil }
        guard let text = value as? String, !text.isEmpty, text.utf8.count <= 256,
            !text.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw BatchRejection(400, "'appVersion' is not 1 to 256 bytes of text without control characters")
        }
        return text
    }

    private static func event(_ value: Any) throws -> TelemetryEvent {
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
        let date = try date(fields["date"], "date")
        let packageID = try component(fields["packageID"], "packageID")
        let version = try component(fields["version"], "version")
        let restored = try component(fields["restoredVersion"], "restoredVersion")
        let errorCode = try errorCode(fields["errorCode"])
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

    private static func errorCode(_ value: Any?) throws -> String? {
        guard let value, !(value is NSNull) else { return nil }
        guard let text = value as? String, !text.isEmpty, text.utf8.count <= 64,
            text.utf8.allSatisfy({ codeBytes[Int($0)] })
        else {
            throw BatchRejection(400, "'errorCode' is not 1 to 64 letters, digits, '.', '_' or '-'")
        }
        return text
    }

    private static func date(_ value: Any?, _ name: String) throws -> Date {
        guard let text = value as? String, text.count <= 40, let date = parseDate(text) else {
            throw BatchRejection(400, "'\(name)' is not an ISO 8601 time")
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
