import Foundation

/// Runs `body` over `items` with at most `limit` at once; results in the items' order.
/// The first failure cancels the others and is thrown.
package func forEachConcurrently<Item: Sendable, Result: Sendable>(
    _ items: [Item],
    limit: Int,
    _ body: @escaping @Sendable (Item) async throws -> Result
) async throws -> [Result] {
    try await withThrowingTaskGroup(of: (Int, Result).self) { group in
        var results = [Result?](repeating: nil, count: items.count)
        var next = 0
        func add() {
            guard next < items.count else { return }
            let index = next
            let item = items[index]
            group.addTask { (index, try await body(item)) }
            next += 1
        }
        for _ in 0..<max(1, limit) { add() }
        while let (index, result) = try await group.next() {
            results[index] = result
            add()
        }
        return results.compactMap { $0 }
    }
}
