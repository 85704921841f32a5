/// How asset names and file names are taken apart, and which names each file answers to:
/// shared by the resolvers that index trees and the store's name index (``NameIndex``).
package enum AssetName {
    /// `name` with leading `/`, empty and `.` components removed; nil when it has a `..`
    /// component (it would leave the tree) or nothing is left.
    ///
    /// Names that need no change (the usual case) are returned as they are, after one scan.
    package static func normalise(_ name: String) -> String? {
        var name = name
        // One scan over contiguous UTF-8 (native strings always are).
        let verdict = name.withUTF8 { scan($0) }
        switch verdict {
        case .clean(let prefix):
            if prefix == 0 { return name }
            // The prefix is ASCII, so this index is on a character boundary.
            return String(name[name.utf8.index(name.utf8.startIndex, offsetBy: prefix)...])
        case .escapes:
            return nil
        case .rebuild:
            let kept = name.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
            return kept.isEmpty ? nil : kept.joined(separator: "/")
        }
    }

    private enum Verdict {
        /// Fine after dropping this many leading bytes of `/` and `./`.
        case clean(prefix: Int)
        /// Has a `..` component.
        case escapes
        /// Has empty or `.` components inside.
        case rebuild
    }

    private static func scan(_ bytes: UnsafeBufferPointer<UInt8>) -> Verdict {
        let slash = UInt8(ascii: "/")
        let dot = UInt8(ascii: ".")
        let count = bytes.count
        var start = 0
        while start < count {
            if bytes[start] == slash {
                start += 1
            } else if bytes[start] == dot, start + 1 < count, bytes[start + 1] == slash {
                start += 2
            } else {
                break
            }
        }
        var needsRebuild = false
        var length = 0
        var dots = 0
        var index = start
        while index < count {
            let byte = bytes[index]
            if byte == slash {
                if length == 2 && dots == 2 { return .escapes }
                if length == 0 || (length == 1 && dots == 1) { needsRebuild = true }
                length = 0
                dots = 0
            } else {
                length += 1
                if byte == dot { dots += 1 }
            }
            index += 1
        }
        if length == 2 && dots == 2 { return .escapes }
        if length == 0 || (length == 1 && dots == 1) { needsRebuild = true }
        return needsRebuild ? .rebuild : .clean(prefix: start)
    }

    /// A file name taken apart: `icon@2x.png` is stem `icon`, scale 2, extension `png`.
    package struct Parts: Equatable {
        /// The name without scale suffix and extension.
        package var stem: Substring
        /// The scale from an `@<n>x` suffix, or nil when there is none (scale 1).
        package var scale: Int?
        /// The extension after the last dot, or nil.
        package var pathExtension: Substring?
    }

    /// Takes a file name (one component) apart. A leading dot does not start an extension
    /// (`.hidden`), and neither does a trailing one.
    ///
    /// Works on the UTF-8 view: `.`, `@` and `x` are ASCII, so their indices are character
    /// boundaries, and indexing trees of 100,000 files must not pay for grapheme breaking.
    package static func parts(of fileName: Substring) -> Parts {
        var stemWithScale = fileName
        var pathExtension: Substring?
        let utf8 = fileName.utf8
        if let dot = utf8.lastIndex(of: UInt8(ascii: ".")), dot != utf8.startIndex,
            utf8.index(after: dot) != utf8.endIndex
        {
            stemWithScale = fileName[..<dot]
            pathExtension = fileName[utf8.index(after: dot)...]
        }
        if let (stem, scale) = scaleSuffix(of: stemWithScale) {
            return Parts(stem: stem, scale: scale, pathExtension: pathExtension)
        }
        return Parts(stem: stemWithScale, scale: nil, pathExtension: pathExtension)
    }

    /// Splits `icon@12x` into `icon` and 12; nil unless the text ends in `@<digits>x`
    /// (no leading zero) after a non-empty stem.
    private static func scaleSuffix(of text: Substring) -> (Substring, Int)? {
        let utf8 = text.utf8
        guard utf8.last == UInt8(ascii: "x"), let at = utf8.lastIndex(of: UInt8(ascii: "@")), at != utf8.startIndex
        else { return nil }
        let digits = utf8[utf8.index(after: at)..<utf8.index(before: utf8.endIndex)]
        guard !digits.isEmpty, digits.count <= 3, digits.first != UInt8(ascii: "0") else { return nil }
        var scale = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else { return nil }
            scale = scale * 10 + Int(byte - UInt8(ascii: "0"))
        }
        return (text[..<at], scale)
    }
}
