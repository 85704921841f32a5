import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Keeps a spawned child from inheriting the parent's descriptors above 2.
///
/// A child started while another thread holds a pipe open (a `Process` whose output is being
/// read, a transfer's socket) inherits that descriptor unless it is close-on-exec; a server
/// that then outlives the test keeps the pipe's write end open, and whoever reads the pipe
/// waits for an end that never comes. A list of open descriptors taken before the spawn
/// misses one opened between the listing and the spawn, so the child closes every
/// descriptor from 3 up as it starts (`posix_spawn_file_actions_addclosefrom_np`, glibc
/// 2.34 and later), and only where that is missing are the listed ones closed.
enum InheritedDescriptors {
    private typealias CloseFrom =
        @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32

    /// glibc declares it only under `_GNU_SOURCE`, which Swift's Glibc module is built without.
    private static let closeFrom: CloseFrom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np")
        else { return nil }
        return unsafeBitCast(symbol, to: CloseFrom.self)
    }()

    /// Adds to `actions`, after the actions that set up descriptors 0 to 2, the closing of
    /// every other descriptor (on Apple platforms `POSIX_SPAWN_CLOEXEC_DEFAULT` does more).
    static func closeAll(in actions: inout posix_spawn_file_actions_t) {
        if let closeFrom, closeFrom(&actions, 3) == 0 { return }
        // glibc ignores a close action for a descriptor closed in the meantime.
        let open =
            (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd"))
            ?? (try? FileManager.default.contentsOfDirectory(atPath: "/dev/fd")) ?? []
        for descriptor in open.compactMap({ Int32($0) }) where descriptor > 2 {
            posix_spawn_file_actions_addclose(&actions, descriptor)
        }
    }
}
