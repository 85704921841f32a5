import Foundation

/// A script patch as an app's ``PatchActivator`` sees it: an installed package whose files
/// the app loads (evaluates scripts, applies configuration) itself.
public struct ScriptPatch: Sendable, Hashable {
    /// The package id.
    public var id: String
    /// The active version.
    public var version: String
    /// The installed tree, absolute for this launch.
    public var directory: URL
    /// Whether it was installed from a local folder (a debug patch) rather than downloaded.
    public var isLocal: Bool

    /// Creates a value.
    public init(id: String, version: String, directory: URL, isLocal: Bool) {
        self.id = id
        self.version = version
        self.directory = directory
        self.isLocal = isLocal
    }
}

/// The app's hook that activates script patches.
///
/// The engine calls it one patch at a time, in the order of the last patch list: at launch
/// for every installed patch (``UpdaterPatches/activateInstalled(with:)``), and after each
/// sync for the patches it added or updated (``UpdaterPatches/sync(from:activator:)``). A
/// patch whose activation throws is recorded as ``PackageState/failed`` with the error; the
/// others are activated all the same.
///
/// ```swift
/// struct ScriptLoader: PatchActivator {
///     func activate(_ patch: ScriptPatch) async throws {
///         let script = try String(contentsOf: patch.directory.appendingPathComponent("main.js"), encoding: .utf8)
///         try await engine.evaluate(script)
///     }
/// }
/// ```
public protocol PatchActivator: Sendable {
    /// Activates one patch.
    ///
    /// - Parameter patch: The installed patch.
    /// - Throws: Anything, to mark the patch failed.
    func activate(_ patch: ScriptPatch) async throws
}

extension ScriptPatch {
    /// How activating one patch went.
    public struct Activation: Sendable {
        /// The package id.
        public var id: String
        /// The version activated.
        public var version: String
        /// Why the activation failed, if it did.
        public var error: HotUpdateError?

        /// Creates a value.
        public init(id: String, version: String, error: HotUpdateError? = nil) {
            self.id = id
            self.version = version
            self.error = error
        }

        /// Whether the hook accepted the patch.
        public var succeeded: Bool { error == nil }
    }
}
