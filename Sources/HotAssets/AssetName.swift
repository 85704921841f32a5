/// How asset names and file names are taken apart.
enum AssetName {
    /// `name` with leading `/`, empty and `.` components removed; nil when it has a `..`
    /// component (it would leave the tree) or nothing is left.
    ///
    /// Names that need no change (the usual case) are returned as they are, after one scan.
    static func normalise(_ name: String) -> String? {
        var needsRebuild = false
        var length = 0
        var dots = 0
        for byte in name.utf8 {
            if byte == UInt8(ascii: "/") {
                if length == 0 || (length == 1 && dots == 1) { needsRebuild = true }
                if length == 2 && dots == 2 { return nil }
                length = 0
                dots = 0
            } else {
                length += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
        }
        if length == 2 && dots == 2 { return nil }
        if length == 0 || (length == 1 && dots == 1) { needsRebuild = true }
        guard needsRebuild else { return name }
        let kept = name.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }
        return kept.isEmpty ? nil : kept.joined(separator: "/")
    }

    /// A file name taken apart: `icon@2x.png` is stem `icon`, scale 2, extension `png`.
    struct Parts: Equatable {
        /// The name without scale suffix and extension.
        var stem: Substring
        /// The scale from an `@<n>x` suffix, or nil when there is none (scale 1).
        var scale: Int?
        /// The extension after the last dot, or nil.
        var pathExtension: Substring?
    }

    /// Takes a file name (one component) apart. A leading dot does not start an extension
    /// (`.hidden`), and neither does a trailing one.
    static func parts(of fileName: Substring) -> Parts {
        var stemWithScale = fileName
        var pathExtension: Substring?
        if let dot = fileName.lastIndex(of: "."), dot != fileName.startIndex,
            fileName.index(after: dot) != fileName.endIndex
        {
            stemWithScale = fileName[..<dot]
            pathExtension = fileName[fileName.index(after: dot)...]
        }
        if let (stem, scale) = scaleSuffix(of: stemWithScale) {
            return Parts(stem: stem, scale: scale, pathExtension: pathExtension)
        }
        return Parts(stem: stemWithScale, scale: nil, pathExtension: pathExtension)
    }

    /// Splits `icon@12x` into `icon` and 12; nil unless the text ends in `@<digits>x`
    /// (no leading zero) after a non-empty stem.
    private static func scaleSuffix(of text: Substring) -> (Substring, Int)? {
        guard text.last == "x", let at = text.lastIndex(of: "@"), at != text.startIndex else { return nil }
        let digits = text[text.index(after: at)..<text.index(before: text.endIndex)]
        guard !digits.isEmpty, digits.count <= 3, digits.first != "0", digits.allSatisfy({ $0.isASCII && $0.isNumber }),
            let scale = Int(digits)
        else { return nil }
        return (text[..<at], scale)
    }
}
