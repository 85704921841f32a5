import Foundation

#if canImport(Synchronization) && !canImport(Darwin) && !LOCKED_WITH_NSLOCK
import Synchronization
#endif

/// A value shared between threads, read and changed only under its lock: the one lock type
/// of the package.
///
/// Off Apple platforms the lock is the standard library's `Mutex`. On Apple platforms
/// `Mutex` needs iOS 18 and macOS 15, above the package's deployment targets, so the lock
/// is an `NSLock` there; the interface is the same. `scripts/test-traits apple` type-checks
/// that storage on Linux with `-D LOCKED_WITH_NSLOCK`.
///
/// ```swift
/// let count = Locked(0)
/// count.withLock { $0 += 1 }
/// ```
package final class Locked<Value: Sendable>: @unchecked Sendable {
    #if canImport(Synchronization) && !canImport(Darwin) && !LOCKED_WITH_NSLOCK
    private let mutex: Mutex<Value>

    /// Creates the value.
    package init(_ value: Value) {
        mutex = Mutex(value)
    }

    /// Runs `body` with the value, under the lock.
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        try mutex.withLock { (value: inout sending Value) throws(Failure) -> sending Result in try body(&value) }
    }
    #else
    private let lock = NSLock()
    private var stored: Value

    /// Creates the value.
    package init(_ value: Value) {
        stored = value
    }

    /// Runs `body` with the value, under the lock.
    package func withLock<Result, Failure: Error>(
        _ body: (inout Value) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&stored)
    }
    #endif

    /// The value now.
    package var value: Value {
        withLock { $0 }
    }

    /// Replaces the value.
    package func set(_ newValue: Value) {
        withLock { $0 = newValue }
    }
}
