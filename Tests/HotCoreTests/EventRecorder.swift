import Foundation
import HotCore

/// Reads an updater's event stream after the operations that produced it: every event a
/// finished operation published is already buffered, so reading up to a known last event
/// never waits for anything that has not happened.
struct EventRecorder {
    private var iterator: AsyncStream<UpdateEvent>.AsyncIterator
    /// Every event read so far.
    private(set) var events: [UpdateEvent] = []

    init(_ updater: Updater) {
        iterator = updater.events().makeAsyncIterator()
    }

    /// Reads until an event matches `last` (included).
    mutating func read(until last: (UpdateEvent) -> Bool) async {
        while let event = await iterator.next() {
            events.append(event)
            if last(event) { return }
        }
    }

    /// Reads until the state change `last` of package `id` (included); returns the states of
    /// `id` read on the way, in order.
    mutating func states(of id: String, through last: PackageState) async -> [PackageState] {
        var states: [PackageState] = []
        while let event = await iterator.next() {
            events.append(event)
            guard case .state(let change) = event, change.id == id else { continue }
            states.append(change.state)
            if change.state == last { break }
        }
        return states
    }
}
