import Foundation
import HotCore
import Testing

@testable import HotTransport

/// The one mapping of HTTP failures to errors both HTTP transports throw.
@Suite("HTTP failures")
struct HTTPFailureTests {
    static let subject = "https://cdn.example.com/pkg.zip"

    @Test("each failure has its code, its message and the request's URL")
    func codesAndMessages() {
        struct StackError: Error {}
        let cases: [(HTTPFailure, HotUpdateError.Code, String)] = [
            (.cancelled, .cancelled, "the transfer was cancelled"),
            (
                .announcedTooLong(2000, limit: 1000), .byteLimitExceeded,
                "the server announces 2000 bytes, more than the 1000 allowed"
            ),
            (.tooLong(limit: 1000), .byteLimitExceeded, "the body is longer than the 1000 bytes allowed"),
            (
                .tooSlow(received: 12, window: .seconds(5), bytesPerSecond: 100), .timedOut,
                "timed out: fewer than 100 bytes per second over 5.0 seconds (12 bytes received)"
            ),
            (.totalTimeout(.seconds(30)), .timedOut, "timed out: the request took longer than 30.0 seconds"),
            (.timedOut("no answer"), .timedOut, "timed out: no answer"),
            (.tooManyRedirects(11, limit: 10), .transportFailed, "too many redirects (11, at most 10 allowed)"),
            (
                .truncated(received: 400, expected: 1000, reason: nil), .truncated,
                "the body ended after 400 of 1000 bytes"
            ),
            (
                .truncated(received: 400, expected: nil, reason: "connection reset"), .truncated,
                "the body ended after 400 bytes, before its announced length: connection reset"
            ),
            (.badURL("cannot fetch this URL"), .invalidArgument, "cannot fetch this URL"),
            (.failed("the request failed"), .transportFailed, "the request failed"),
        ]
        for (failure, code, message) in cases {
            let error = failure.error(subject: Self.subject, cause: StackError())
            #expect(error.code == code, "\(failure)")
            #expect(error.message == message)
            #expect(error.subject == Self.subject)
        }
    }

    @Test("the byte limit: an announced length over it, and bytes past it; HEAD announces nothing")
    func byteLimit() throws {
        let url = try #require(URL(string: Self.subject))
        let limited = TransportRequest(url: url, maxBytes: 1000)
        let headers = ["content-length": "1001"]
        #expect(limited.announcedLength(headers) == 1001)
        #expect(limited.announcedFailure(1001) != nil)
        #expect(limited.announcedFailure(1000) == nil)
        #expect(limited.announcedFailure(nil) == nil)
        #expect(limited.receivedFailure(1000) == nil)
        #expect(limited.receivedFailure(1001) != nil)
        #expect(TransportRequest(url: url).receivedFailure(.max) == nil)
        #expect(TransportRequest(url: url, method: "HEAD").announcedLength(headers) == nil)
        #expect(limited.announcedLength(["content-length": "many"]) == nil)
    }

    @Test("only http and https URLs are fetched")
    func schemes() throws {
        for (text, accepted) in [
            ("http://a/b", true), ("HTTPS://a/b", true), ("file:///b", false), ("ftp://a/b", false),
        ] {
            let request = TransportRequest(url: try #require(URL(string: text)))
            let refused = (try? request.requireHTTP("T")) == nil
            #expect(refused == !accepted, "\(text)")
        }
    }
}
