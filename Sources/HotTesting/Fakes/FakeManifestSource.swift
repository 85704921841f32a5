import HotCore

/// A `ManifestSource` that returns whatever manifest (or error) the test sets.
///
/// ```swift
/// let source = FakeManifestSource(manifest: try Manifest(packages: [descriptor]))
/// await source.set(.failure(HotUpdateError(.httpStatus, "503")))
/// ```
public actor FakeManifestSource: ManifestSource {
    private var result: Result<Manifest, HotUpdateError>
    private var fetches = 0

    /// Creates a source returning `manifest`.
    public init(manifest: Manifest) {
        result = .success(manifest)
    }

    /// Sets what the next fetches return.
    public func set(_ result: Result<Manifest, HotUpdateError>) {
        self.result = result
    }

    /// How many times the manifest was fetched.
    public var fetchCount: Int { fetches }

    public func fetchManifest() async throws -> Manifest {
        fetches += 1
        return try result.get()
    }
}
