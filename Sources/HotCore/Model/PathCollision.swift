import Foundation

/// The one rule for names that must not collide, used by the publisher's tools (`hot pack`,
/// `hot sign`, `hot verify`) and by the client alike: two paths of a package, or two package
/// ids of a manifest, collide when they are equal after Unicode normalisation (`café` as one
/// code point and as `e` plus a combining accent), or, unless the package is for
/// case-sensitive file systems only, after case folding (`Readme.txt` and `README.txt`),
/// which the case-insensitive volumes macOS and iOS use by default make one file.
///
/// A directory is a path too: `Img/a.png` and `img/b.png` collide, since they would be one
/// directory on such a volume and two in the archive.
///
/// ```swift
/// if let clash = PathCollision.first(in: ["café.txt", "cafe\u{301}.txt"], caseSensitive: false) {
///     print("\(clash.first) and \(clash.second) name one file")
/// }
/// ```
package enum PathCollision {
    /// Two names that collide, in the order they were given.
    package struct Clash: Sendable, Hashable {
        /// The name seen first.
        package var first: String
        /// The later name that collides with it.
        package var second: String
        /// Whether they still differ once normalised: they differ by case (and perhaps also
        /// by normalisation); else only by normalisation.
        package var byCaseOnly: Bool
    }

    /// The key two names collide under: their canonical composition (NFC), case folded
    /// unless `caseSensitive`.
    package static func key(_ name: String, caseSensitive: Bool) -> String {
        let composed = name.precomposedStringWithCanonicalMapping
        return caseSensitive ? composed : composed.folding(options: [.caseInsensitive], locale: nil)
    }

    /// The first pair of `names` (`/`-separated paths, or ids) that collide, their
    /// directories included; nil when none do. The same name given twice is no collision.
    package static func first(in names: some Sequence<String>, caseSensitive: Bool) -> Clash? {
        var seen: [String: String] = [:]
        for name in names {
            var prefix = ""
            for component in name.split(separator: "/") {
                prefix = prefix.isEmpty ? String(component) : prefix + "/" + component
                let key = key(prefix, caseSensitive: caseSensitive)
                if let earlier = seen[key] {
                    // Compared by their bytes: Swift's `==` already equates canonical equivalents.
                    if !earlier.utf8.elementsEqual(prefix.utf8) {
                        let normalisedAlike = earlier.precomposedStringWithCanonicalMapping.utf8.elementsEqual(
                            prefix.precomposedStringWithCanonicalMapping.utf8
                        )
                        return Clash(first: earlier, second: prefix, byCaseOnly: !normalisedAlike)
                    }
                } else {
                    seen[key] = prefix
                }
            }
        }
        return nil
    }

    /// `name` with every scalar beyond ASCII escaped (`cafe\u{301}.txt`): two normalisations
    /// of one text look alike printed, and not escaped.
    static func escaped(_ name: String) -> String {
        name.unicodeScalars.map { $0.escaped(asASCII: true) }.joined()
    }

    /// Throws when two of `names` collide, naming both.
    ///
    /// - Parameters:
    ///   - names: Paths or ids.
    ///   - caseSensitive: Whether names that differ only by case are allowed.
    ///   - what: What the names are, for the message ("paths of package images").
    ///   - packageID: The package the error names, if any.
    /// - Throws: ``HotUpdateError/Code/pathCollision``.
    package static func check(
        _ names: some Sequence<String>,
        caseSensitive: Bool,
        what: String,
        packageID: String? = nil
    ) throws {
        guard let clash = first(in: names, caseSensitive: caseSensitive) else { return }
        let how =
            clash.byCaseOnly
            ? "differ only by case, which case-insensitive volumes (the default on macOS and iOS) make one name"
            : "(\(escaped(clash.first)) and \(escaped(clash.second))) are the same text in two Unicode normalisations, which file systems and clients treat as one name"
        throw HotUpdateError(
            .pathCollision,
            "\(what): '\(clash.first)' and '\(clash.second)' \(how)",
            packageID: packageID
        )
    }
}
