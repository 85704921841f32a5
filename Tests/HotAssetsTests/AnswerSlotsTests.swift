import Foundation
import HotCore
import Testing

@testable import HotAssets

/// The answers the index resolver keeps, one slot per file, in both kinds: lock-free, and
/// behind a lock (what systems without `Synchronization`'s atomics get).
@Suite("The index resolver's kept answers")
struct AnswerSlotsTests {
    static func answer(_ number: Int) -> KeptAnswer {
        KeptAnswer(
            url: URL(fileURLWithPath: "/store/packages/p/1/file-\(number)"),
            origin: .package(id: "p", version: "1")
        )
    }

    @Test("Each file keeps the first answer kept for it and hands that one out after", arguments: [false, true])
    func keepsTheFirst(locked: Bool) {
        let slots = makeAnswerSlots(count: 5_000, locked: locked)
        #expect(slots.kept(0) == nil && slots.kept(4_999) == nil)
        let first = Self.answer(4_999)
        #expect(slots.keep(first, for: 4_999) === first)
        #expect(slots.keep(Self.answer(1), for: 4_999) === first)
        #expect(slots.kept(4_999) === first)
        #expect(slots.kept(4_998) == nil && slots.kept(0) == nil)
    }

    @Test("Threads that keep answers for the same files at once all get the one kept", arguments: [false, true])
    func racingKeepers(locked: Bool) {
        let count = 3_000
        let threads = 8
        let slots = makeAnswerSlots(count: count, locked: locked)
        let results = Results(threads: threads)
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            var mine: [ObjectIdentifier] = []
            mine.reserveCapacity(count)
            for number in 0..<count {
                mine.append(ObjectIdentifier(slots.keep(Self.answer(number), for: number)))
            }
            results.set(thread, mine)
        }
        let seen = results.all
        #expect(seen.allSatisfy { $0.count == count })
        var disagreements = 0
        for number in 0..<count {
            guard let kept = slots.kept(number) else {
                disagreements += 1
                continue
            }
            let identity = ObjectIdentifier(kept)
            if seen.contains(where: { $0[number] != identity }) { disagreements += 1 }
        }
        #expect(disagreements == 0)
    }

    @Test(
        "The answers kept are released with their slots, wherever they lie, and a losing keeper's at once",
        arguments: [false, true]
    )
    func releasedWithTheSlots(locked: Bool) {
        weak var early: KeptAnswer?
        weak var late: KeptAnswer?
        weak var loser: KeptAnswer?
        var slots: (any AnswerSlots)? = makeAnswerSlots(count: 100_000, locked: locked)
        do {
            let first = Self.answer(3)
            let last = Self.answer(99_999)
            early = first
            late = last
            _ = slots?.keep(first, for: 3)
            _ = slots?.keep(last, for: 99_999)
        }
        do {
            let other = Self.answer(3)
            loser = other
            _ = slots?.keep(other, for: 3)
        }
        #expect(loser == nil)
        #expect(early != nil && late != nil)
        slots = nil
        #expect(early == nil && late == nil)
    }
}

/// What each thread of ``AnswerSlotsTests/racingKeepers(locked:)`` was handed, behind a lock.
private final class Results: @unchecked Sendable {
    private let lock = NSLock()
    // Guarded by `lock`.
    private var values: [[ObjectIdentifier]]

    init(threads: Int) { values = Array(repeating: [], count: threads) }

    func set(_ thread: Int, _ seen: [ObjectIdentifier]) { lock.withLock { values[thread] = seen } }

    var all: [[ObjectIdentifier]] { lock.withLock { values } }
}
