import Foundation

/// Applies a binary patch of one file against its previous version (a delta's
/// the delta layout). HotArchive's `ZstdPatcher` implements zstd's patch-from format;
/// an updater without a patcher refuses deltas that hold patches and installs the full package.
public protocol BinaryPatcher: Sendable {
    /// The patch format this patcher applies (the `method` of a patch in the delta layout), such as `zstd`.
    var method: String { get }

    /// Writes `base` patched by `patch` to `output`.
    ///
    /// - Parameters:
    ///   - patch: The patch file.
    ///   - base: The file the patch was made against.
    ///   - output: Where the result goes; created, never a link followed.
    ///   - expectedSize: The result's size from the signed file list: a patch that produces
    ///     more is refused before it is written.
    /// - Throws: ``HotUpdateError/Code/corruptArchive`` for a patch that cannot be applied,
    ///   ``HotUpdateError/Code/limitExceeded`` when the sizes exceed the patcher's bound.
    func apply(patch: URL, base: URL, to output: URL, expectedSize: Int64) throws
}
