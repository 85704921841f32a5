import Foundation
import HotCore
import Testing

@Suite("ByteStream")
struct ByteStreamTests {
    @Test("chunks arrive in order and the end is reported")
    func ordered() async throws {
        let (stream, writer) = ByteStream.makeStream(capacity: 2)
        let producer = Task {
            for index in 0..<100 { try await writer.write(Data([UInt8(index)])) }
            writer.finish()
        }
        var received: [UInt8] = []
        for try await chunk in stream { received.append(contentsOf: chunk) }
        try await producer.value
        #expect(received == (0..<100).map { UInt8($0) })
    }

    @Test("a thread producer blocks when the consumer is behind, by at most the capacity")
    func backpressure() async throws {
        let (stream, writer) = ByteStream.makeStream(capacity: 3)
        let written = Counter()
        let thread = Thread {
            for _ in 0..<50 {
                guard (try? writer.writeBlocking(Data([1]))) != nil else { return }
                written.increment()
            }
            writer.finish()
        }
        thread.start()
        var consumed = 0
        for try await _ in stream {
            consumed += 1
            // The producer can never be more than the capacity (plus the chunk in hand) ahead.
            #expect(written.value - consumed <= 4)
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(consumed == 50)
    }

    @Test("an error from the producer reaches the consumer after the chunks before it")
    func failure() async throws {
        let (stream, writer) = ByteStream.makeStream()
        try writer.writeBlocking(Data([1, 2]))
        writer.finish(throwing: HotUpdateError(.truncated, "closed early"))
        var iterator = stream.makeAsyncIterator()
        #expect(try await iterator.next() == Data([1, 2]))
        await #expect(throws: HotUpdateError(.truncated, "")) { _ = try await iterator.next() }
    }

    @Test("cancelling the body stops a blocked producer and runs its cancellation handler")
    func cancellation() async throws {
        let (stream, writer) = ByteStream.makeStream(capacity: 1)
        let handlerRan = Counter()
        writer.onCancel { handlerRan.increment() }
        try writer.writeBlocking(Data([1]))
        let blocked = Task.detached { () -> Bool in
            do {
                try writer.writeBlocking(Data([2]))
                try writer.writeBlocking(Data([3]))
                return false
            } catch {
                return error is CancellationError
            }
        }
        stream.cancel()
        #expect(await blocked.value)
        #expect(handlerRan.value == 1)
        #expect(writer.isCancelled)
    }

    @Test("cancelling the consuming task ends the iteration and cancels the producer")
    func taskCancellation() async throws {
        let (stream, writer) = ByteStream.makeStream()
        let reading = AsyncStream<Void>.makeStream()
        let consumer = Task {
            for try await _ in stream { reading.continuation.yield() }
        }
        // The consumer is iterating once it has taken a first chunk.
        try await writer.write(Data([0]))
        for await _ in reading.stream { break }
        consumer.cancel()
        await #expect(throws: CancellationError.self) { try await consumer.value }
        #expect(throws: CancellationError.self) { try writer.writeBlocking(Data([1])) }
    }

    /// A producer faster than its consumer keeps chunks ready: a consumer whose task is
    /// cancelled must still stop there, not drain a transfer that never ends.
    @Test("a cancelled task stops reading even while chunks are ready")
    func cancelledTaskStopsWithChunksReady() async throws {
        let (stream, writer) = ByteStream.makeStream(capacity: 4)
        let handlerRan = Counter()
        writer.onCancel { handlerRan.increment() }
        for index in 0..<4 { try writer.writeBlocking(Data([UInt8(index)])) }
        let gate = AsyncStream<Void>.makeStream()
        let consumer = Task { () -> Int in
            var received = 0
            for await _ in gate.stream { break }
            do {
                for try await chunk in stream { received += chunk.count }
            } catch is CancellationError {
                return received
            } catch {
                return -2
            }
            return -1
        }
        consumer.cancel()
        gate.continuation.yield()
        #expect(await consumer.value == 0)
        #expect(handlerRan.value == 1)
        #expect(throws: CancellationError.self) { try writer.writeBlocking(Data([9])) }
    }
}

/// A thread-safe counter for tests.
final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var count = 0
    func increment() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}
