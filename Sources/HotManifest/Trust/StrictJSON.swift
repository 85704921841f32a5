import Foundation
import HotCore

/// The one reader of manifest bytes, client and publisher alike: a JSON document is read
/// only when every parser would read it the same way.
///
/// Refused, each with its own code, before any signature is checked:
/// - bytes that are not JSON (``HotUpdateError/Code/manifestNotJSON``, the first bytes shown
///   escaped), bytes after the document included;
/// - a document that ends inside a value (``HotUpdateError/Code/manifestTruncated``);
/// - nesting deeper than ``maxDepth`` (``HotUpdateError/Code/manifestTooDeep``);
/// - an object with a key twice, at any depth (``HotUpdateError/Code/manifestDuplicateKey``):
///   parsers differ on which value wins, so a reviewer's tool and a client would read two
///   manifests out of one signed text;
/// - a number that is not an integer of at most 2^53 − 1 in magnitude
///   (``HotUpdateError/Code/manifestNumberOutOfRange``): the exact range of every JSON
///   parser (I-JSON, RFC 7493); manifests carry no other numbers.
///
/// Strings must be valid UTF-8 with valid escapes; object keys are compared after their
/// escapes are decoded (`"a"` and `"\u0061"` are one key).
package enum StrictJSON {
    /// The deepest nesting accepted.
    package static let maxDepth = 64
    /// The largest integer magnitude accepted: 2^53 − 1.
    package static let maxInteger: Int64 = (1 << 53) - 1

    /// The first bytes of `data`, quoted, with everything unprintable escaped: what an error
    /// about a document that is not a manifest shows of it.
    package static func opening(of data: Data) -> String {
        let head = data.prefix(48)
        var text = ""
        for scalar in String(decoding: head, as: UTF8.self).unicodeScalars {
            text += scalar.escaped(asASCII: true)
        }
        return "\"\(text)\"" + (data.count > head.count ? "…" : "")
    }

    /// A checked document's top level.
    package enum TopLevel: Sendable {
        /// An object: the byte range of each value, by key.
        case object([String: Range<Data.Index>])
        /// Any other value.
        case other
    }

    /// Reads all of `data` and returns its top level.
    ///
    /// - Parameter what: Names the document in errors ("the manifest").
    /// - Throws: `HotUpdateError` with the codes listed on the type.
    package static func read(_ data: Data, what: String = "the manifest") throws -> TopLevel {
        try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) -> TopLevel in
            var reader = Reader(bytes: buffer, data: data, what: what)
            reader.skipWhitespace()
            guard reader.peek() != nil else {
                throw HotUpdateError(.manifestTruncated, "\(what) is empty")
            }
            let top = try reader.value(depth: 1, keepSpans: true)
            reader.skipWhitespace()
            guard reader.index == buffer.count else {
                throw reader.notJSON("bytes after the end of the JSON document")
            }
            return top
        }
    }

    /// Reads the bytes in place (a manifest of ten thousand packages is megabytes); offsets
    /// count from the first byte, spans are indices of `data`.
    private struct Reader {
        let bytes: UnsafeRawBufferPointer
        let data: Data
        let what: String
        var index = 0

        init(bytes: UnsafeRawBufferPointer, data: Data, what: String) {
            self.bytes = bytes
            self.data = data
            self.what = what
        }

        func peek() -> UInt8? { index < bytes.count ? bytes[index] : nil }

        var offset: Int { index }

        var opening: String { StrictJSON.opening(of: data) }

        func notJSON(_ what: String) -> HotUpdateError {
            HotUpdateError(
                .manifestNotJSON,
                "\(self.what) is not JSON: \(what) at byte \(offset); it starts with \(opening)"
            )
        }

        func truncated(_ inside: String) -> HotUpdateError {
            HotUpdateError(
                .manifestTruncated,
                "\(what) ends at byte \(offset), inside \(inside): it was cut short"
            )
        }

        mutating func skipWhitespace() {
            while let c = peek(), c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 { index += 1 }
        }

        mutating func expect(_ c: UInt8, inside: String) throws {
            guard let next = peek() else { throw truncated(inside) }
            guard next == c else {
                throw notJSON("'\(Character(Unicode.Scalar(c)))' expected, found \(Self.describe(next))")
            }
            index += 1
        }

        static func describe(_ byte: UInt8) -> String {
            (0x21...0x7E).contains(byte) ? "'\(Character(Unicode.Scalar(byte)))'" : "byte 0x\(String(byte, radix: 16))"
        }

        mutating func value(depth: Int, keepSpans: Bool = false) throws -> TopLevel {
            guard let c = peek() else { throw truncated("a value") }
            switch c {
            case UInt8(ascii: "{"):
                return .object(try object(depth: depth, keepSpans: keepSpans))
            case UInt8(ascii: "["):
                try array(depth: depth)
            case UInt8(ascii: "\""):
                _ = try string()
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                try number()
            case UInt8(ascii: "t"):
                try literal("true")
            case UInt8(ascii: "f"):
                try literal("false")
            case UInt8(ascii: "n"):
                try literal("null")
            default:
                throw notJSON("\(Self.describe(c)) where a value was expected")
            }
            return .other
        }

        mutating func enter(_ depth: Int) throws {
            guard depth <= StrictJSON.maxDepth else {
                throw HotUpdateError(
                    .manifestTooDeep,
                    "\(what) nests deeper than \(StrictJSON.maxDepth) levels (at byte \(offset))"
                )
            }
        }

        mutating func object(depth: Int, keepSpans: Bool) throws -> [String: Range<Data.Index>] {
            try enter(depth)
            index += 1
            var spans: [String: Range<Data.Index>] = [:]
            var keys = Set<String>()
            skipWhitespace()
            if peek() == UInt8(ascii: "}") {
                index += 1
                return spans
            }
            while true {
                skipWhitespace()
                guard let next = peek() else { throw truncated("an object") }
                guard next == UInt8(ascii: "\"") else {
                    throw notJSON("a key expected, found \(Self.describe(next))")
                }
                let keyOffset = offset
                let key = try string()
                guard keys.insert(key).inserted else {
                    throw HotUpdateError(
                        .manifestDuplicateKey,
                        "\(what) has the key \"\(key)\" twice in one object (the second at byte \(keyOffset)): parsers differ on which one counts"
                    )
                }
                skipWhitespace()
                try expect(UInt8(ascii: ":"), inside: "an object")
                skipWhitespace()
                let start = index
                _ = try value(depth: depth + 1)
                if keepSpans { spans[key] = (data.startIndex + start)..<(data.startIndex + index) }
                skipWhitespace()
                guard let separator = peek() else { throw truncated("an object") }
                index += 1
                if separator == UInt8(ascii: ",") { continue }
                guard separator == UInt8(ascii: "}") else {
                    index -= 1
                    throw notJSON("',' or '}' expected, found \(Self.describe(separator))")
                }
                return spans
            }
        }

        mutating func array(depth: Int) throws {
            try enter(depth)
            index += 1
            skipWhitespace()
            if peek() == UInt8(ascii: "]") {
                index += 1
                return
            }
            while true {
                skipWhitespace()
                _ = try value(depth: depth + 1)
                skipWhitespace()
                guard let separator = peek() else { throw truncated("a list") }
                index += 1
                if separator == UInt8(ascii: ",") { continue }
                guard separator == UInt8(ascii: "]") else {
                    index -= 1
                    throw notJSON("',' or ']' expected, found \(Self.describe(separator))")
                }
                return
            }
        }

        mutating func literal(_ word: String) throws {
            for expected in word.utf8 {
                guard let c = peek() else { throw truncated("'\(word)'") }
                guard c == expected else { throw notJSON("'\(word)' misspelt") }
                index += 1
            }
        }

        /// Reads a string and returns it with its escapes decoded.
        mutating func string() throws -> String {
            index += 1  // the opening quote
            // Most strings have no escape: validated where they lie, with no copy first.
            var end = index
            while end < bytes.count {
                let c = bytes[end]
                if c == UInt8(ascii: "\"") {
                    let text = String(validating: UnsafeRawBufferPointer(rebasing: bytes[index..<end]), as: UTF8.self)
                    index = end + 1
                    guard let text else { throw notJSON("a string that is not valid UTF-8") }
                    return text
                }
                if c == UInt8(ascii: "\\") || c < 0x20 { break }
                end += 1
            }
            var decoded = Array(UnsafeRawBufferPointer(rebasing: bytes[index..<end]))
            index = end
            while true {
                guard let c = peek() else { throw truncated("a string") }
                index += 1
                switch c {
                case UInt8(ascii: "\""):
                    guard let text = String(validating: decoded, as: UTF8.self) else {
                        throw notJSON("a string that is not valid UTF-8")
                    }
                    return text
                case UInt8(ascii: "\\"):
                    guard let escape = peek() else { throw truncated("a string") }
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                    case UInt8(ascii: "b"): decoded.append(0x08)
                    case UInt8(ascii: "f"): decoded.append(0x0C)
                    case UInt8(ascii: "n"): decoded.append(0x0A)
                    case UInt8(ascii: "r"): decoded.append(0x0D)
                    case UInt8(ascii: "t"): decoded.append(0x09)
                    case UInt8(ascii: "u"): decoded.append(contentsOf: try unicodeEscape())
                    default: throw notJSON("an unknown escape '\\\(Character(Unicode.Scalar(escape)))'")
                    }
                case 0..<0x20:
                    index -= 1
                    throw notJSON("a control character in a string")
                default:
                    decoded.append(c)
                }
            }
        }

        /// Four hex digits after `\u`, and the low half after a high surrogate; the scalar as UTF-8.
        mutating func unicodeEscape() throws -> [UInt8] {
            let first = try hexQuad()
            var scalarValue = UInt32(first)
            if (0xD800..<0xDC00).contains(first) {
                guard peek() == UInt8(ascii: "\\") else { throw notJSON("a lone surrogate in a \\u escape") }
                index += 1
                guard peek() == UInt8(ascii: "u") else { throw notJSON("a lone surrogate in a \\u escape") }
                index += 1
                let second = try hexQuad()
                guard (0xDC00..<0xE000).contains(second) else { throw notJSON("a lone surrogate in a \\u escape") }
                scalarValue = 0x10000 + ((UInt32(first) - 0xD800) << 10) + (UInt32(second) - 0xDC00)
            } else if (0xDC00..<0xE000).contains(first) {
                throw notJSON("a lone surrogate in a \\u escape")
            }
            guard let scalar = Unicode.Scalar(scalarValue) else { throw notJSON("an invalid \\u escape") }
            return Array(String(Character(scalar)).utf8)
        }

        mutating func hexQuad() throws -> UInt16 {
            var value: UInt16 = 0
            for _ in 0..<4 {
                guard index < bytes.count else { throw truncated("a string") }
                guard let digit = Self.hexValue(bytes[index]) else {
                    throw notJSON("a \\u escape that is not four hex digits")
                }
                value = value << 4 | UInt16(digit)
                index += 1
            }
            return value
        }

        static func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): c - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): c - UInt8(ascii: "A") + 10
            default: nil
            }
        }

        static func isDigit(_ c: UInt8?) -> Bool {
            guard let c else { return false }
            return (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(c)
        }

        /// Reads a number: JSON's grammar, then the integer range.
        mutating func number() throws {
            let start = index
            if peek() == UInt8(ascii: "-") { index += 1 }
            guard let first = peek() else { throw truncated("a number") }
            guard Self.isDigit(first) else { throw notJSON("a number without digits") }
            index += 1
            if first != UInt8(ascii: "0") {
                while Self.isDigit(peek()) { index += 1 }
            } else if Self.isDigit(peek()) {
                throw notJSON("a number with a leading zero")
            }
            let integerEnd = index
            var fractional = false
            if peek() == UInt8(ascii: ".") {
                index += 1
                guard Self.isDigit(peek()) else {
                    if peek() == nil { throw truncated("a number") }
                    throw notJSON("a number with no digits after '.'")
                }
                while Self.isDigit(peek()) { index += 1 }
                fractional = true
            }
            if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
                index += 1
                if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { index += 1 }
                guard Self.isDigit(peek()) else {
                    if peek() == nil { throw truncated("a number") }
                    throw notJSON("a number with no digits in its exponent")
                }
                while Self.isDigit(peek()) { index += 1 }
                fractional = true
            }
            let (bytes, end) = (self.bytes, index)
            let text = { String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<end]), as: UTF8.self) }
            guard !fractional else {
                throw HotUpdateError(
                    .manifestNumberOutOfRange,
                    "\(what) has the number \(text()) at byte \(start): only integers are allowed"
                )
            }
            // The magnitude, digit by digit: past 2^53 − 1 it stops.
            var magnitude: Int64 = 0
            for position in (bytes[start] == UInt8(ascii: "-") ? start + 1 : start)..<integerEnd {
                magnitude = magnitude * 10 + Int64(bytes[position] - UInt8(ascii: "0"))
                guard magnitude <= StrictJSON.maxInteger else {
                    throw HotUpdateError(
                        .manifestNumberOutOfRange,
                        "\(what) has the number \(text()) at byte \(start), beyond ±(2^53 − 1), which not every parser reads exactly"
                    )
                }
            }
        }
    }
}

/// The manifest's strict JSON reader, for other documents a server must read exactly as
/// every other parser would, such as a telemetry batch.
public enum StrictJSONDocument {
    /// Checks that `data` is one JSON document every parser reads the same way: no key twice
    /// in an object, integers of at most 2^53 − 1 only, nothing after the document.
    ///
    /// - Parameters:
    ///   - data: The bytes.
    ///   - what: Names the document in errors ("the batch").
    /// - Throws: `HotUpdateError` with the codes `StrictJSON` lists (`manifestNotJSON`,
    ///   `manifestDuplicateKey`, `manifestNumberOutOfRange`, …).
    public static func check(_ data: Data, what: String) throws {
        _ = try StrictJSON.read(data, what: what)
    }
}
