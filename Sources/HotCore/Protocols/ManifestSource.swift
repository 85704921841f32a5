/// Learns what is current: which packages, which versions, how to check them.
///
/// Implementations in `HotManifest`: `SignedManifestSource` (the native signed manifest),
/// `StaticManifestSource` (unsigned schema-1 manifests, for development) and
/// `PatchInfoManifestSource` (the older single `{url, md5}` patch info).
///
/// ```swift
/// let manifest = try await StaticManifestSource(url: manifestURL, transport: transport).fetchManifest()
/// ```
public protocol ManifestSource: Sendable {
    /// Fetches and validates the current manifest.
    ///
    /// - Throws: ``HotUpdateError`` (``HotUpdateError/Code/manifestInvalid``, transport errors).
    func fetchManifest() async throws -> Manifest
}
