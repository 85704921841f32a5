import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The events a telemetry reporter (HotTransport's `HTTPTelemetryReporter`) has not yet had accepted, kept in files under a
/// directory so that a process that dies loses none of them: the next process sends them.
///
/// ```
/// queue.jsonl          events not yet in a batch, one JSON object a line, oldest first
/// queue.lock           flock(2) taken around every change of queue.jsonl
/// batch-<id>.json      a batch being sent: its exact body, flock(2)-held by its sender
/// ```
///
/// Taking a batch moves events from the queue into a batch file under the queue lock, and
/// the sender holds that file's lock until the collector answers. A batch file whose lock
/// can be taken belongs to a process that died (or failed to send it): it is sent again
/// with the same bytes, so the same batch id, which the collector stores once.
package final class TelemetrySpool: Sendable {
    package let directory: URL
    /// The most events kept in the queue; past it the oldest are dropped.
    package let bound: Int

    private var queueFile: URL { directory.appendingPathComponent("queue.jsonl") }
    private var lockFile: URL { directory.appendingPathComponent("queue.lock") }

    package init(directory: URL, bound: Int) throws {
        self.directory = directory
        self.bound = max(1, bound)
        do {
            try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot create the telemetry queue directory")
        }
    }

    /// A batch taken from the spool, its file locked by this process until ``finish(_:sent:)``.
    package struct Batch: Sendable {
        /// The batch's id, as in its body.
        package let id: String
        /// The exact body to post.
        package let body: Data
        /// How many events it holds.
        package let count: Int
        fileprivate let descriptor: Int32
    }

    /// Appends `line` (one encoded event) and returns how many old events were dropped to
    /// keep the bound.
    package func append(_ line: Data) throws -> Int {
        try withQueueLock {
            let descriptor = open(queueFile.path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0o600)
            guard descriptor >= 0 else { throw posixError("cannot open the telemetry queue") }
            defer { close(descriptor) }
            var record = line
            record.append(0x0A)
            try writeAll(descriptor, record)
            let lines = readLines()
            guard lines.count > bound else { return 0 }
            let excess = lines.count - bound
            try replaceQueue(with: Array(lines.dropFirst(excess)))
            return excess
        }
    }

    /// Events waiting in the queue (not counting batch files).
    package func queuedCount() -> Int {
        (try? withQueueLock { readLines().count }) ?? 0
    }

    /// Whether anything is left to send: events in the queue, or a batch file no live
    /// process holds whose id is not in `skipping`.
    package func hasPending(skipping: Set<String>) -> Bool {
        (try? withQueueLock { !readLines().isEmpty || orphanIDs().contains { !skipping.contains($0) } }) ?? false
    }

    /// Takes the next batch: first a batch file no live process holds (an earlier process
    /// died sending it, or it failed), else up to `limit` events from the queue, encoded
    /// by `encode(id, lines)` into the body sent. Nil when there is nothing to send.
    package func take(limit: Int, skipping: Set<String>, encode: (String, [Data]) throws -> Data) throws -> Batch? {
        try withQueueLock {
            for id in orphanIDs() where !skipping.contains(id) {
                if let batch = try lockBatch(id: id) { return batch }
            }
            let lines = readLines()
            guard !lines.isEmpty else { return nil }
            let taken = Array(lines.prefix(max(1, limit)))
            let id = UUID().uuidString.lowercased()
            let body = try encode(id, taken)
            let file = batchFile(id)
            let temporary = directory.appendingPathComponent(".batch-\(id).tmp")
            do {
                try body.write(to: temporary)
                try FileManager.default.moveItem(at: temporary, to: file)
            } catch {
                try? FileManager.default.removeItem(at: temporary)
                throw HotUpdateError.wrap(error, as: .fileSystem, "cannot write a telemetry batch")
            }
            try replaceQueue(with: Array(lines.dropFirst(taken.count)))
            guard let batch = try lockBatch(id: id) else {
                throw HotUpdateError(.fileSystem, "a new telemetry batch file is held by another process")
            }
            return batch
        }
    }

    /// Ends a batch: `sent` (the collector answered, accepting or refusing it) deletes its
    /// file; otherwise the file stays for a later attempt. Either way its lock is released.
    package func finish(_ batch: Batch, sent: Bool) {
        if sent { try? FileManager.default.removeItem(at: batchFile(batch.id)) }
        close(batch.descriptor)
    }

    // MARK: - Files

    private func batchFile(_ id: String) -> URL { directory.appendingPathComponent("batch-\(id).json") }

    private func orphanIDs() -> [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasPrefix("batch-") && $0.hasSuffix(".json") }.sorted().map {
            String($0.dropFirst("batch-".count).dropLast(".json".count))
        }
    }

    /// Opens and locks batch `id`'s file without waiting; nil when another holder has it or
    /// it is gone.
    private func lockBatch(id: String) throws -> Batch? {
        let descriptor = open(batchFile(id).path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return nil }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            close(descriptor)
            return nil
        }
        guard let body = try? Data(contentsOf: batchFile(id)), !body.isEmpty else {
            // An empty or unreadable file holds nothing to send.
            try? FileManager.default.removeItem(at: batchFile(id))
            close(descriptor)
            return nil
        }
        struct Count: Decodable { var events: [Ignored] }
        struct Ignored: Decodable {}
        let count = (try? JSONDecoder().decode(Count.self, from: body).events.count) ?? 0
        return Batch(id: id, body: body, count: count, descriptor: descriptor)
    }

    private func readLines() -> [Data] {
        guard let data = try? Data(contentsOf: queueFile) else { return [] }
        return data.split(separator: 0x0A, omittingEmptySubsequences: true).map { Data($0) }
    }

    private func replaceQueue(with lines: [Data]) throws {
        var data = Data()
        for line in lines {
            data.append(line)
            data.append(0x0A)
        }
        do {
            try data.write(to: queueFile, options: .atomic)
        } catch {
            throw HotUpdateError.wrap(error, as: .fileSystem, "cannot rewrite the telemetry queue")
        }
    }

    private func withQueueLock<T>(_ body: () throws -> T) throws -> T {
        let descriptor = open(lockFile.path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw posixError("cannot open the telemetry queue lock") }
        defer { close(descriptor) }
        while flock(descriptor, LOCK_EX) != 0 {
            guard errno == EINTR else { throw posixError("cannot lock the telemetry queue") }
        }
        return try body()
    }

    private func writeAll(_ descriptor: Int32, _ data: Data) throws {
        try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            guard let base = buffer.baseAddress else { return }
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, base.advanced(by: offset), buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw posixError("cannot append to the telemetry queue")
                }
                offset += written
            }
        }
    }

    private func posixError(_ message: String) -> HotUpdateError {
        HotUpdateError(.fileSystem, "\(message): \(String(cString: strerror(errno)))")
    }
}
