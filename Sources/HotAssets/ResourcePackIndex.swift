import Foundation
import HotCore

/// A kind of resource a pack lists in its `index.json`: the key whose array names the files.
public struct ResourceType: RawRepresentable, Hashable, Sendable, Codable, ExpressibleByStringLiteral,
    CustomStringConvertible
{
    /// The key in `index.json`.
    public let rawValue: String
    /// Creates a type from its key.
    public init(rawValue: String) { self.rawValue = rawValue }
    /// Creates a type from a string literal.
    public init(stringLiteral value: String) { self.rawValue = value }

    /// Overlay images (blend masks).
    public static let overlay: ResourceType = "overlay"
    /// Images.
    public static let image: ResourceType = "image"
    /// Filters (lookup tables and the like).
    public static let filter: ResourceType = "filter"
    /// Fonts.
    public static let font: ResourceType = "font"
    /// The types handled unless an app says otherwise: overlay, image, filter, font.
    public static let defaults: Set<ResourceType> = [.overlay, .image, .filter, .font]

    public var description: String { rawValue }
}

/// The `index.json` of a resource pack: which files of the pack are resources, by type.
///
/// ```json
/// {"id": "3000", "type": "overlay",
///  "overlay": ["blend.jpg", "blend_light1.jpg", "blend_light2.jpg"]}
/// ```
///
/// `id` and `type` are required (`id` may be a string or a number). Every other key whose
/// value is an array of strings lists file names, relative to the pack's root, for the type
/// named by the key; other keys are ignored. Names are checked when a pack is opened
/// (``ResourcePackResolver``), not here.
///
/// ```swift
/// let index = try ResourcePackIndex.decode(Data(contentsOf: packDirectory.appendingPathComponent("index.json")))
/// print(index.id, index.type, index.names[.overlay] ?? [])
/// ```
public struct ResourcePackIndex: Sendable, Hashable {
    /// The index's file name at the root of a pack.
    public static let fileName = "index.json"
    /// The largest index read.
    public static let maxBytes = 4 << 20

    /// The pack's id, as the index says.
    public var id: String
    /// The pack's main type, as the index says.
    public var type: String
    /// The file names listed per type, in index order.
    public var names: [ResourceType: [String]]

    /// Creates an index.
    public init(id: String, type: String, names: [ResourceType: [String]]) {
        self.id = id
        self.type = type
        self.names = names
    }

    /// Parses `index.json` bytes.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid` when the bytes are not a JSON object
    ///   with a string or number `id` and a string `type`.
    public static func decode(_ data: Data) throws -> ResourcePackIndex {
        let raw: RawIndex
        do {
            raw = try JSONDecoder().decode(RawIndex.self, from: data)
        } catch {
            throw HotUpdateError(
                .manifestInvalid,
                "index.json is not a JSON object: \(error)",
                subject: fileName,
                cause: SendableErrorBox(error)
            )
        }
        guard let id = raw.id, !id.isEmpty else {
            throw HotUpdateError(.manifestInvalid, "index.json has no string or number \"id\"", subject: fileName)
        }
        guard let type = raw.type, !type.isEmpty else {
            throw HotUpdateError(.manifestInvalid, "index.json has no string \"type\"", subject: fileName)
        }
        if let key = raw.mixedKeys.sorted().first {
            throw HotUpdateError(
                .manifestInvalid,
                "index.json's \"\(key)\" mixes file names with other values",
                subject: fileName
            )
        }
        return ResourcePackIndex(id: id, type: type, names: raw.names)
    }

    /// index.json as read: any keys, `id` a string or a number.
    private struct RawIndex: Decodable {
        var id: String?
        var type: String?
        var names: [ResourceType: [String]] = [:]
        var mixedKeys: [String] = []

        struct Key: CodingKey {
            var stringValue: String
            var intValue: Int? { nil }
            init(stringValue: String) { self.stringValue = stringValue }
            init?(intValue: Int) { nil }
        }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: Key.self)
            for key in container.allKeys {
                switch key.stringValue {
                case "id":
                    if let text = try? container.decode(String.self, forKey: key) {
                        id = text
                    } else if let number = try? container.decode(Int64.self, forKey: key) {
                        id = String(number)
                    }
                case "type":
                    type = try? container.decode(String.self, forKey: key)
                default:
                    if let list = try? container.decode([String].self, forKey: key) {
                        names[ResourceType(rawValue: key.stringValue)] = list
                    } else if (try? container.nestedUnkeyedContainer(forKey: key)) != nil {
                        mixedKeys.append(key.stringValue)
                    }
                }
            }
        }
    }

    /// Reads the index at the root of a pack directory.
    ///
    /// - Throws: `HotUpdateError.Code.notFound` when the pack has no `index.json`,
    ///   `HotUpdateError.Code.fileSystem` when it cannot be read or is larger than
    ///   ``maxBytes``, `HotUpdateError.Code.manifestInvalid` as ``decode(_:)``.
    public static func load(fromPackage directory: URL) throws -> ResourcePackIndex {
        let url = directory.appendingPathComponent(fileName)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue else {
            throw HotUpdateError(.notFound, "the pack has no \(fileName)", subject: url.path)
        }
        let data: Data
        do {
            let size = try FileManager.default.attributesOfItem(atPath: url.path)[.size] as? Int ?? 0
            guard size <= maxBytes else {
                throw HotUpdateError(
                    .fileSystem,
                    "\(fileName) is \(size) bytes, more than \(maxBytes)",
                    subject: url.path
                )
            }
            data = try Data(contentsOf: url)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot read \(url.path)")
        }
        do {
            return try decode(data)
        } catch var error as HotUpdateError {
            error.subject = url.path
            throw error
        }
    }
}
