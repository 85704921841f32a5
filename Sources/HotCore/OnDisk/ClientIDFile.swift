import Foundation

/// The file under a store root that keeps the telemetry client identifier
/// (``TelemetryEvent/ClientID``): created once with a random UUID, linked into place so that
/// two processes creating it at once agree on one value.
struct ClientIDFile: Sendable {
    /// The store root.
    let root: URL
    /// The file's name under it.
    let name: String

    /// The identifier the file holds, made and written first when there is none (or the file
    /// does not hold one).
    ///
    /// - Throws: ``HotUpdateError/Code/fileSystem`` when it can be neither read nor written.
    func load() throws -> String {
        let file = root.appendingPathComponent(name)
        if let existing = Self.read(file) { return existing }
        let fileManager = FileManager.default
        let fresh = UUID().uuidString.lowercased()
        let temporary = root.appendingPathComponent(".\(name)-\(UUID().uuidString)")
        do {
            try fileManager.createDirectory(at: root, withIntermediateDirectories: true)
            try Data((fresh + "\n").utf8).write(to: temporary)
            defer { try? fileManager.removeItem(at: temporary) }
            // A file that does not hold an identifier is replaced; one another process
            // linked first wins.
            if fileManager.fileExists(atPath: file.path), Self.read(file) == nil {
                try? fileManager.removeItem(at: file)
            }
            do {
                try fileManager.linkItem(at: temporary, to: file)
            } catch {
                if let existing = Self.read(file) { return existing }
                throw error
            }
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot write the telemetry client id")
        }
        return Self.read(file) ?? fresh
    }

    private static func read(_ file: URL) -> String? {
        guard let data = try? Data(contentsOf: file), let text = String(data: data, encoding: .utf8) else {
            return nil
        }
        let value = text.trimmingCharacters(in: .whitespacesAndNewlines)
        return UUID(uuidString: value) != nil ? value.lowercased() : nil
    }
}
