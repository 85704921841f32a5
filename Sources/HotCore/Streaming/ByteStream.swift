import Foundation

/// A body arriving in chunks, with backpressure: a producer that gets ahead of
/// the consumer by more than the stream's capacity waits.
///
/// Transports make one with ``makeStream(capacity:)`` and write into the
/// ``ByteStream/Writer`` from a thread (``ByteStream/Writer/writeBlocking(_:)``) or a
/// task (``ByteStream/Writer/write(_:)``). Cancelling the consuming task, calling
/// ``cancel()``, or dropping every copy of the stream makes the producer's next
/// write throw `CancellationError` and runs the writer's cancellation handler, so the
/// transfer stops.
///
/// ```swift
/// let (stream, writer) = ByteStream.makeStream()
/// Thread { try? writer.writeBlocking(chunk); writer.finish() }.start()
/// for try await chunk in stream { … }
/// ```
public struct ByteStream: AsyncSequence, Sendable {
    /// A chunk of the body.
    public typealias Element = Data

    private let token: ConsumerToken

    private init(channel: ByteChannel) {
        self.token = ConsumerToken(channel: channel)
    }

    /// Creates a stream and the writer that feeds it.
    ///
    /// - Parameter capacity: How many chunks may wait unread before the producer waits.
    public static func makeStream(capacity: Int = 8) -> (stream: ByteStream, writer: ByteStream.Writer) {
        let channel = ByteChannel(capacity: Swift.max(1, capacity))
        return (ByteStream(channel: channel), ByteStream.Writer(channel: channel))
    }

    /// A stream of the given chunks, already complete.
    public init(chunks: [Data]) {
        let channel = ByteChannel(capacity: Swift.max(1, chunks.count))
        for chunk in chunks where !chunk.isEmpty { try? channel.writeBlocking(chunk) }
        channel.finish(throwing: Optional<any Error>.none)
        self.init(channel: channel)
    }

    /// A stream that fails with `error` before yielding anything.
    public init(failure error: any Error) {
        let channel = ByteChannel(capacity: 1)
        channel.finish(throwing: error)
        self.init(channel: channel)
    }

    /// Stops the body: the producer's next write throws and its cancellation handler runs.
    public func cancel() { token.channel.cancel() }

    public func makeAsyncIterator() -> AsyncIterator { AsyncIterator(token: token) }

    /// Iterates the chunks.
    public struct AsyncIterator: AsyncIteratorProtocol {
        fileprivate let token: ConsumerToken
        /// The next chunk, or nil at the end of the body.
        public mutating func next() async throws -> Data? { try await token.channel.next() }
    }
}

/// Cancels the channel when the last copy of a stream and its iterators is gone.
private final class ConsumerToken: Sendable {
    let channel: ByteChannel
    init(channel: ByteChannel) { self.channel = channel }
    deinit { channel.cancel() }
}

/// The bounded buffer behind a ``ByteStream``. All state is guarded by `condition`.
private final class ByteChannel: @unchecked Sendable {
    private let condition = NSCondition()
    private let capacity: Int
    private var buffer: [Data] = []
    private var head = 0
    private var finished = false
    private var failure: (any Error)?
    private var cancelled = false
    private var consumer: CheckedContinuation<Data?, any Error>?
    private var producers: [CheckedContinuation<Void, any Error>] = []
    private var cancelHandler: (@Sendable () -> Void)?

    init(capacity: Int) { self.capacity = capacity }

    var isCancelled: Bool {
        condition.lock()
        defer { condition.unlock() }
        return cancelled
    }

    private var bufferedCount: Int { buffer.count - head }

    /// Takes the next chunk under the lock, waking producers. Returns the producers to resume.
    private func popLocked() -> (Data, CheckedContinuation<Void, any Error>?)? {
        guard head < buffer.count else { return nil }
        let chunk = buffer[head]
        head += 1
        if head > 64, head * 2 > buffer.count {
            buffer.removeFirst(head)
            head = 0
        }
        condition.broadcast()
        let producer = producers.isEmpty ? nil : producers.removeFirst()
        return (chunk, producer)
    }

    /// Takes a ready chunk without waiting, if there is one.
    private func takeReady() -> Data? {
        condition.lock()
        guard let (chunk, producer) = popLocked() else {
            condition.unlock()
            return nil
        }
        condition.unlock()
        producer?.resume()
        return chunk
    }

    /// Either answers `continuation` now or parks it until a chunk, the end or a cancellation.
    private func answerOrPark(_ continuation: CheckedContinuation<Data?, any Error>) {
        condition.lock()
        if let (chunk, producer) = popLocked() {
            condition.unlock()
            producer?.resume()
            continuation.resume(returning: chunk)
        } else if cancelled {
            condition.unlock()
            continuation.resume(throwing: CancellationError())
        } else if finished {
            let error = failure
            failure = nil
            condition.unlock()
            if let error { continuation.resume(throwing: error) } else { continuation.resume(returning: nil) }
        } else {
            consumer = continuation
            condition.unlock()
        }
    }

    func next() async throws -> Data? {
        // A producer faster than the consumer always has a chunk ready: check the task here,
        // or a cancelled consumer would drain a transfer it no longer wants.
        if Task.isCancelled {
            cancel()
            throw CancellationError()
        }
        if let chunk = takeReady() { return chunk }
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { answerOrPark($0) }
        } onCancel: {
            self.cancel()
        }
    }

    /// Delivers under the lock; returns the consumer to resume, if one was waiting.
    private func deliverLocked(_ chunk: Data) -> CheckedContinuation<Data?, any Error>? {
        if let waiting = consumer {
            consumer = nil
            return waiting
        }
        buffer.append(chunk)
        return nil
    }

    func writeBlocking(_ chunk: Data) throws {
        condition.lock()
        while bufferedCount >= capacity && !cancelled && !finished {
            condition.wait()
        }
        if cancelled {
            condition.unlock()
            throw CancellationError()
        }
        if finished {
            condition.unlock()
            return
        }
        let waiting = deliverLocked(chunk)
        condition.unlock()
        waiting?.resume(returning: chunk)
    }

    private enum WriteAttempt {
        case done
        case full
    }

    /// Delivers `chunk` if there is room. Throws when the consumer has gone away.
    private func tryWrite(_ chunk: Data) throws -> WriteAttempt {
        condition.lock()
        if cancelled {
            condition.unlock()
            throw CancellationError()
        }
        if finished {
            condition.unlock()
            return .done
        }
        guard bufferedCount < capacity else {
            condition.unlock()
            return .full
        }
        let waiting = deliverLocked(chunk)
        condition.unlock()
        waiting?.resume(returning: chunk)
        return .done
    }

    /// Resumes `continuation` when there is room, or now if there already is.
    private func parkProducer(_ continuation: CheckedContinuation<Void, any Error>) {
        condition.lock()
        if cancelled {
            condition.unlock()
            continuation.resume(throwing: CancellationError())
        } else if bufferedCount < capacity || finished {
            condition.unlock()
            continuation.resume()
        } else {
            producers.append(continuation)
            condition.unlock()
        }
    }

    func write(_ chunk: Data) async throws {
        while try tryWrite(chunk) == .full {
            try await withCheckedThrowingContinuation { parkProducer($0) }
        }
    }

    func finish(throwing error: (any Error)?) {
        condition.lock()
        if finished || cancelled {
            condition.unlock()
            return
        }
        finished = true
        let waiting = consumer
        consumer = nil
        if waiting == nil { failure = error }
        let blocked = producers
        producers = []
        condition.broadcast()
        condition.unlock()
        for producer in blocked { producer.resume() }
        if let waiting {
            if let error { waiting.resume(throwing: error) } else { waiting.resume(returning: nil) }
        }
    }

    func cancel() {
        condition.lock()
        if cancelled {
            condition.unlock()
            return
        }
        if finished && bufferedCount == 0 {
            // A finished, drained body has no transfer left to stop.
            cancelled = true
            cancelHandler = nil
            condition.unlock()
            return
        }
        cancelled = true
        buffer.removeAll()
        head = 0
        let waiting = consumer
        consumer = nil
        let blocked = producers
        producers = []
        let handler = cancelHandler
        cancelHandler = nil
        condition.broadcast()
        condition.unlock()
        waiting?.resume(throwing: CancellationError())
        for producer in blocked { producer.resume(throwing: CancellationError()) }
        handler?()
    }

    func setCancelHandler(_ handler: @escaping @Sendable () -> Void) {
        condition.lock()
        if cancelled {
            condition.unlock()
            handler()
            return
        }
        cancelHandler = handler
        condition.unlock()
    }
}

extension ByteStream {
    /// Feeds a ``ByteStream``.
    public struct Writer: Sendable {
        fileprivate let channel: ByteChannel

        /// Delivers a chunk, blocking the calling thread while the consumer is behind.
        /// For producers on threads of their own (libcurl's `curl_easy_perform`); never
        /// call it from a Swift concurrency task.
        ///
        /// - Throws: `CancellationError` once the consumer has gone away.
        public func writeBlocking(_ chunk: Data) throws { try channel.writeBlocking(chunk) }

        /// Delivers a chunk, suspending while the consumer is behind.
        ///
        /// - Throws: `CancellationError` once the consumer has gone away.
        public func write(_ chunk: Data) async throws { try await channel.write(chunk) }

        /// Ends the body, with an error or without. Later writes are ignored.
        public func finish(throwing error: (any Error)? = nil) { channel.finish(throwing: error) }

        /// Whether the consumer has gone away.
        public var isCancelled: Bool { channel.isCancelled }

        /// Sets what runs, once, when the consumer goes away before the end (abort the transfer).
        /// Runs at once if that has already happened.
        public func onCancel(_ handler: @escaping @Sendable () -> Void) { channel.setCancelHandler(handler) }
    }
}
