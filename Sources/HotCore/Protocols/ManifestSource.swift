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

/// A ``ManifestSource`` that can tell, without reading the manifest, that it is still the one
/// with a given ``Manifest/revision``: the check an app runs at every launch then costs the
/// same whatever the size of the catalogue.
///
/// ``Updater/sync(from:)`` asks it when the last sync left nothing to do and nothing happened
/// to the store since; `SignedManifestSource` answers from the channel's timestamp.
public protocol RevisionedManifestSource: ManifestSource {
    /// The current manifest, with its ``Manifest/revision``, or nil when it is the one with
    /// `revision`. A nil answer is checked as fully as a fetch (signatures, expiry): only the
    /// manifest's reading is saved.
    ///
    /// - Throws: As ``ManifestSource/fetchManifest()``.
    func fetchManifest(unlessRevision revision: String) async throws -> Manifest?
}
