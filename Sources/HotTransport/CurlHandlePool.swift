#if Curl && canImport(CHotCurl)
import CHotCurl
import Foundation

/// libcurl easy handles a transport has finished with, kept for its next requests: a handle
/// keeps its connections and TLS sessions across `curl_easy_reset`, so the requests of a sync
/// to one server share a connection and its handshake instead of each making its own.
///
/// A handle serves one transfer at a time (libcurl does not share a connection between
/// threads); the pool keeps at most ``limit`` idle ones and frees the rest, and frees all of
/// them when the last copy of the transport goes.
final class CurlHandlePool: @unchecked Sendable {
    /// The most idle handles kept.
    let limit: Int
    private let lock = NSLock()
    private var idle: [UnsafeMutableRawPointer] = []

    init(limit: Int = 8) {
        self.limit = limit
    }

    deinit {
        for handle in idle { curl_easy_cleanup(handle) }
    }

    /// An idle handle, or a new one; nil when libcurl cannot make one.
    func take() -> UnsafeMutableRawPointer? {
        let reused: UnsafeMutableRawPointer? = lock.withLock { idle.popLast() }
        return reused ?? curl_easy_init()
    }

    /// Takes back a handle whose transfer has ended: reset (options and callbacks cleared,
    /// connections kept) and kept, or freed when enough are idle.
    func give(_ handle: UnsafeMutableRawPointer) {
        curl_easy_reset(handle)
        let kept = lock.withLock { () -> Bool in
            guard idle.count < limit else { return false }
            idle.append(handle)
            return true
        }
        if !kept { curl_easy_cleanup(handle) }
    }
}
#endif
