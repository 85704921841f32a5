import Foundation
import HotCore

#if canImport(Synchronization)
import Synchronization
#endif

/// An answer of the store's index, made once: the asset handed out for a file.
final class KeptAnswer: Sendable {
    let asset: ResolvedAsset

    init(url: URL, origin: ResolvedAsset.Origin) {
        asset = ResolvedAsset(url: url, origin: origin)
    }
}

/// The answers a ``StoreIndexResolver`` has made, one slot per file of the index: each
/// answer (its `URL` and origin) is made the first time its file is asked for and kept, so a
/// name asked again costs the index lookup, one load and a copy of the asset (the slots keep
/// every answer until they go). Shared by the copies of a resolver.
protocol AnswerSlots: AnyObject, Sendable {
    /// The answer kept for file `number`, if one was.
    func kept(_ number: Int) -> KeptAnswer?
    /// Keeps `answer` for file `number` unless another thread kept one first; returns the
    /// one kept.
    func keep(_ answer: KeptAnswer, for number: Int) -> KeptAnswer
}

/// The slots for `count` files: lock-free where the system has `Synchronization`'s
/// atomics, else (or when `locked`, which tests ask for) behind a lock.
func makeAnswerSlots(count: Int, locked: Bool = false) -> any AnswerSlots {
    #if canImport(Synchronization)
    if !locked {
        if #available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *) {
            return AtomicAnswerSlots(count: count)
        }
    }
    #endif
    return LockedAnswerSlots(count: count)
}

#if canImport(Synchronization)
/// A preallocated array of atomic words, each 0 or a retained `KeptAnswer`: read with
/// one acquiring load, filled with one compare-and-exchange (a thread that loses the race
/// releases its retain and returns the winner's), released when the slots go.
@available(macOS 15, iOS 18, tvOS 18, watchOS 11, visionOS 2, *)
private final class AtomicAnswerSlots: AnswerSlots, @unchecked Sendable {
    // The words are only touched atomically; the pointers themselves never change.
    private let words: UnsafeMutablePointer<Atomic<UInt>>
    private let count: Int
    /// One bit per 512 words (a 4 KiB page of them), set when an answer is kept there: going
    /// away looks only at the pages used.
    private let used: UnsafeMutablePointer<Atomic<UInt>>
    private let usedCount: Int
    private static let wordsPerPage = 512

    init(count: Int) {
        self.count = count
        // Zeroed by calloc, which hands out a large block as pages not yet touched: the slots
        // of 100,000 files cost no time and no memory until answers are kept in them. A word
        // of zeros is `Atomic<UInt>(0)`.
        guard let raw = calloc(max(count, 1), MemoryLayout<Atomic<UInt>>.stride) else {
            fatalError("cannot allocate the answer slots of \(count) files")
        }
        words = raw.bindMemory(to: Atomic<UInt>.self, capacity: max(count, 1))
        let pages = (count + Self.wordsPerPage - 1) / Self.wordsPerPage
        usedCount = max((pages + UInt.bitWidth - 1) / UInt.bitWidth, 1)
        used = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: usedCount)
        for position in 0..<usedCount {
            (used + position).initialize(to: Atomic<UInt>(0))
        }
    }

    deinit {
        for mark in 0..<usedCount {
            var bits = used[mark].load(ordering: .acquiring)
            while bits != 0 {
                let page = mark * UInt.bitWidth + bits.trailingZeroBitCount
                bits &= bits - 1
                let start = page * Self.wordsPerPage
                for position in start..<min(start + Self.wordsPerPage, count) {
                    let word = words[position].load(ordering: .acquiring)
                    if word != 0, let pointer = UnsafeRawPointer(bitPattern: word) {
                        Unmanaged<KeptAnswer>.fromOpaque(pointer).release()
                    }
                }
            }
        }
        used.deinitialize(count: usedCount)
        used.deallocate()
        free(UnsafeMutableRawPointer(words))
    }

    @inline(__always)
    func kept(_ number: Int) -> KeptAnswer? {
        precondition(number >= 0 && number < count, "a file number outside the index")
        let bits = words[number].load(ordering: .acquiring)
        guard bits != 0, let pointer = UnsafeRawPointer(bitPattern: bits) else { return nil }
        // The slot holds a retain until the slots go: the answer is alive, and is returned
        // retained once more for the caller.
        return Unmanaged<KeptAnswer>.fromOpaque(pointer).takeUnretainedValue()
    }

    func keep(_ answer: KeptAnswer, for number: Int) -> KeptAnswer {
        precondition(number >= 0 && number < count, "a file number outside the index")
        let retained = Unmanaged.passRetained(answer)
        let mine = UInt(bitPattern: retained.toOpaque())
        let (exchanged, winner) = words[number].compareExchange(
            expected: 0,
            desired: mine,
            successOrdering: .acquiringAndReleasing,
            failureOrdering: .acquiring
        )
        if exchanged {
            let page = number / Self.wordsPerPage
            used[page / UInt.bitWidth].bitwiseOr(1 << UInt(page % UInt.bitWidth), ordering: .releasing)
            return answer
        }
        // Another thread kept one first (a failed exchange never stores 0 back).
        retained.release()
        guard let pointer = UnsafeRawPointer(bitPattern: winner) else {
            preconditionFailure("an answer slot was emptied while its slots live")
        }
        return Unmanaged<KeptAnswer>.fromOpaque(pointer).takeUnretainedValue()
    }
}
#endif

/// The same behind a lock, for systems without `Synchronization`'s atomics.
private final class LockedAnswerSlots: AnswerSlots, Sendable {
    /// An answer stays until the slots go.
    private let answers: Locked<[KeptAnswer?]>

    init(count: Int) {
        answers = Locked(Array(repeating: nil, count: count))
    }

    func kept(_ number: Int) -> KeptAnswer? {
        answers.withLock { $0[number] }
    }

    func keep(_ answer: KeptAnswer, for number: Int) -> KeptAnswer {
        answers.withLock { answers in
            if let known = answers[number] { return known }
            answers[number] = answer
            return answer
        }
    }
}
