/// How good a file is as the answer to one asset name; smaller is better. Shared by the
/// resolvers that index a tree and the store's name index, so both answer alike.
package struct AssetKeyRank: Comparable, Sendable {
    /// -1 for exact-only names, else the scale's place in the preference.
    package var tier: Int
    /// 0 when the name's own extension matched, 1 when an extension was added.
    package var kind: Int
    /// The extension's place in the preferred order.
    package var extensionRank: Int
    package var pathExtension: String
    package var path: String

    package static func < (lhs: AssetKeyRank, rhs: AssetKeyRank) -> Bool {
        (lhs.tier, lhs.kind, lhs.extensionRank, lhs.pathExtension, lhs.path)
            < (rhs.tier, rhs.kind, rhs.extensionRank, rhs.pathExtension, rhs.path)
    }
}

extension AssetName {
    /// Each extension's place in `order`, lowercased; the first place wins for repeats.
    package static func extensionRanks(_ order: [String]) -> [String: Int] {
        Dictionary(order.enumerated().map { ($1.lowercased(), $0) }, uniquingKeysWith: { first, _ in first })
    }

    /// Offers every name the file at `path` answers to, each with the file's rank for that
    /// name: the path itself (when it has a scale suffix or no extension), `stem@2x` for a
    /// scaled file, and `stem.ext` and `stem` at the scale's place in `scales` (best first).
    ///
    /// - Parameters:
    ///   - path: The file's normalised path (`img/icon@2x.png`).
    ///   - folder: The path's folder with a trailing `/`, or `""`.
    ///   - fileName: The path's last component.
    ///   - scales: The preferred scales, best first.
    ///   - extensionRanks: From ``extensionRanks(_:)``.
    ///   - offer: Called once per name.
    package static func forEachKey(
        path: String,
        folder: String,
        fileName: String,
        scales: [Int],
        extensionRanks: [String: Int],
        _ offer: (String, AssetKeyRank) -> Void
    ) {
        let parts = AssetName.parts(of: fileName[...])
        let stemKey = folder + parts.stem
        if parts.scale != nil || parts.pathExtension == nil {
            offer(path, AssetKeyRank(tier: -1, kind: 0, extensionRank: 0, pathExtension: "", path: path))
        }
        let lowered = parts.pathExtension.map(lowercased)
        if let scale = parts.scale, let lowered {
            // `sub/sample@2x` names that scale exactly, with any extension.
            offer(
                stemKey + "@" + String(scale) + "x",
                AssetKeyRank(
                    tier: -1,
                    kind: 1,
                    extensionRank: extensionRanks[lowered] ?? extensionRanks.count,
                    pathExtension: lowered,
                    path: path
                )
            )
        }
        let scale = parts.scale ?? 1
        let tier: Int
        if let rank = scales.firstIndex(of: scale) {
            tier = rank
        } else if scale == 1 {
            tier = scales.count  // the name as given, after every listed scale
        } else {
            return
        }
        if let pathExtension = parts.pathExtension, let lowered {
            let extensionRank = extensionRanks[lowered] ?? extensionRanks.count
            offer(
                stemKey + "." + String(pathExtension),
                AssetKeyRank(tier: tier, kind: 0, extensionRank: 0, pathExtension: "", path: path)
            )
            offer(
                stemKey,
                AssetKeyRank(tier: tier, kind: 1, extensionRank: extensionRank, pathExtension: lowered, path: path)
            )
        } else {
            offer(
                stemKey,
                AssetKeyRank(
                    tier: tier,
                    kind: 1,
                    extensionRank: extensionRanks.count + 1,
                    pathExtension: "",
                    path: path
                )
            )
        }
    }

    /// Splits a normalised path into its folder (with a trailing `/`, or `""`) and file name.
    package static func split(_ path: String) -> (folder: String, fileName: String) {
        // `/` is ASCII: its UTF-8 index is a character boundary.
        guard let slash = path.utf8.lastIndex(of: UInt8(ascii: "/")) else { return ("", path) }
        return (String(path[...slash]), String(path[path.utf8.index(after: slash)...]))
    }

    /// The extension lowercased; without a copy through Unicode case mapping when it is
    /// already lowercase ASCII, as nearly every extension is.
    private static func lowercased(_ text: Substring) -> String {
        if text.utf8.allSatisfy({ $0 < 0x80 && !($0 >= UInt8(ascii: "A") && $0 <= UInt8(ascii: "Z")) }) {
            return String(text)
        }
        return text.lowercased()
    }
}
