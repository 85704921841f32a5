import Foundation
import HotCore

/// A document signed apart from the manifest it concerns (``RolloutPart``, ``TimestampPart``):
/// a `_type` and a schema that a reader checks before any field.
protocol SignedPart: Decodable {
    /// The `_type` the part must have.
    static var type: String { get }
    /// The schema this code reads.
    static var currentSchema: Int { get }
    /// What messages call the part: "the timestamp".
    static var what: String { get }
    /// The part's `_type` as read.
    var type: String { get }
    /// The part's schema as read.
    var schema: Int { get }
}

extension SignedPart {
    /// Parses the signed bytes of a part (the strict reader first: duplicate keys, inexact
    /// numbers, trailing bytes) and checks its type and schema.
    ///
    /// - Throws: `HotUpdateError.Code.manifestInvalid`, and the strict reader's codes.
    static func decodeSignedPart(_ data: Data) throws -> Self {
        _ = try StrictJSON.read(data, what: what)
        let part: Self
        do {
            part = try SignedManifestBody.jsonDecoder.decode(Self.self, from: data)
        } catch {
            throw HotUpdateError.wrap(error, as: .manifestInvalid, "\(what) is not valid JSON of its schema")
        }
        guard part.type == type, part.schema == currentSchema else {
            throw HotUpdateError(
                .manifestInvalid,
                "\(what) is '\(part.type)' schema \(part.schema), expected '\(type)' schema \(currentSchema)"
            )
        }
        return part
    }
}
