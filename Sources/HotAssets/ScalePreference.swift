/// Which scale variants of an image to prefer, best first.
///
/// Scale 3 is the file with the `@3x` suffix (`icon@3x.png`), scale 2 `@2x`, and scale 1
/// the file with no suffix (`icon.png`). The default, `[3, 2, 1]`, suits a 3x screen; a
/// 2x device would use `[2, 3, 1]` (sharpest that is not wasteful first).
///
/// ```swift
/// let resolver = try DirectoryAssetResolver(directory: bundleDir, origin: .bundle,
///                                           scales: ScalePreference([2, 3, 1]))
/// ```
public struct ScalePreference: Sendable, Hashable, CustomStringConvertible {
    /// The scales, best first; positive and without repeats.
    public let scales: [Int]

    /// Creates a preference.
    ///
    /// - Parameter scales: Scales best first. Values below 1 and repeats are dropped; an
    ///   empty list means `[1]` (only unsuffixed files).
    public init(_ scales: [Int] = [3, 2, 1]) {
        var seen = Set<Int>()
        let kept = scales.filter { $0 >= 1 && seen.insert($0).inserted }
        self.scales = kept.isEmpty ? [1] : kept
    }

    /// `[3, 2, 1]`.
    public static let standard = ScalePreference()

    /// The file-name suffix of a scale: `@3x` for 3, `@2x` for 2, nothing for 1.
    public static func suffix(for scale: Int) -> String {
        scale == 1 ? "" : "@\(scale)x"
    }

    /// The suffixes in preference order (`["@3x", "@2x", ""]` by default).
    public var suffixes: [String] { scales.map(Self.suffix(for:)) }

    /// Where `scale` stands in the preference (0 is best), or nil when it is not wanted.
    public func rank(of scale: Int) -> Int? { scales.firstIndex(of: scale) }

    public var description: String { "[" + scales.map(String.init).joined(separator: ", ") + "]" }
}
