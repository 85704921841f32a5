import Foundation
import HotCore

#if canImport(Synchronization)
import Synchronization
#endif

/// The answers a ``StoreIndexResolver`` has made, one slot per file of the index: each
/// answer (its `URL` and origin) is made the first time its file is asked for and kept, so a
/// name asked again costs the index lookup and one load. Shared by the copies of a resolver.
protocol AnswerSlots: AnyObject, Sendable {
    /// The answer kept for file `number`, or the one `make` returns, kept from now on.
    func answer(_ number: Int, make: () -> ResolvedAsset) -> ResolvedAsset
}

/// The slots for `count` files: lock-free where the system has `Synchronization`'s
/// atomics, else behind a lock.
func makeAnswerSlots(count: Int) -> any AnswerSlots {
    #if canImport(Synchronization)
    if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
        return AtomicAnswerSlots(count: count)
    }
    #endif
    return LockedAnswerSlots(count: count)
}

/// One kept answer.
private final class AnswerBox: Sendable {
    let asset: ResolvedAsset
    init(_ asset: ResolvedAsset) { self.asset = asset }
}

#if canImport(Synchronization)
/// A preallocated array of atomic words, each 0 or a retained ``AnswerBox``: read with
/// one acquiring load, filled with one compare-and-exchange (a thread that loses the race
/// releases its box and returns the winner's), released when the slots go.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
private final class AtomicAnswerSlots: AnswerSlots, @unchecked Sendable {
    // The words are only touched atomically; the pointer itself never changes.
    private let words: UnsafeMutablePointer<Atomic<UInt>>
    private let count: Int

    init(count: Int) {
        self.count = count
        words = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: max(count, 1))
        for position in 0..<count {
            (words + position).initialize(to: Atomic<UInt>(0))
        }
    }

    deinit {
        for position in 0..<count {
            let bits = words[position].load(ordering: .acquiring)
            if bits != 0, let pointer = UnsafeRawPointer(bitPattern: bits) {
                Unmanaged<AnswerBox>.fromOpaque(pointer).release()
            }
        }
        words.deinitialize(count: count)
        words.deallocate()
    }

    @inline(__always)
    func answer(_ number: Int, make: () -> ResolvedAsset) -> ResolvedAsset {
        precondition(number >= 0 && number < count, "a file number outside the index")
        let bits = words[number].load(ordering: .acquiring)
        if bits != 0, let pointer = UnsafeRawPointer(bitPattern: bits) {
            return Unmanaged<AnswerBox>.fromOpaque(pointer)._withUnsafeGuaranteedRef { $0.asset }
        }
        let box = Unmanaged.passRetained(AnswerBox(make()))
        let mine = UInt(bitPattern: box.toOpaque())
        let (exchanged, winner) = words[number].compareExchange(
            expected: 0,
            desired: mine,
            successOrdering: .acquiringAndReleasing,
            failureOrdering: .acquiring
        )
        if exchanged { return box._withUnsafeGuaranteedRef { $0.asset } }
        box.release()
        guard let pointer = UnsafeRawPointer(bitPattern: winner) else { return make() }
        return Unmanaged<AnswerBox>.fromOpaque(pointer)._withUnsafeGuaranteedRef { $0.asset }
    }
}
#endif

/// The same behind a lock, for systems without `Synchronization`'s atomics.
private final class LockedAnswerSlots: AnswerSlots, @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`.
    private var answers: [ResolvedAsset?]

    init(count: Int) {
        answers = Array(repeating: nil, count: count)
    }

    func answer(_ number: Int, make: () -> ResolvedAsset) -> ResolvedAsset {
        if let known = lock.withLock({ answers[number] }) { return known }
        let made = make()
        return lock.withLock {
            if let known = answers[number] { return known }
            answers[number] = made
            return made
        }
    }
}
