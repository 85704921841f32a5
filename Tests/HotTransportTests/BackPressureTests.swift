import Testing

@testable import HotTransport

/// URLSessionTransport's suspend/resume decision, run here with Apple's answer to "can a
/// running task be suspended" as well as Linux's.
@Suite("URLSession back-pressure")
struct BackPressureTests {
    @Test("Apple: suspends once past the limit, once, and resumes at half of it")
    func suspendsAndResumes() {
        var pressure = BackPressure(limit: 100, canSuspend: true)
        #expect(!pressure.shouldSuspend(pendingBytes: 100))
        #expect(pressure.shouldSuspend(pendingBytes: 101))
        #expect(pressure.suspended)
        #expect(!pressure.shouldSuspend(pendingBytes: 500))
        #expect(!pressure.shouldResume(pendingBytes: 51))
        #expect(pressure.shouldResume(pendingBytes: 50))
        #expect(!pressure.suspended)
        #expect(!pressure.shouldResume(pendingBytes: 0))
        #expect(pressure.shouldSuspend(pendingBytes: 101))
    }

    @Test("FoundationNetworking: never suspends, so never resumes")
    func neverSuspends() {
        var pressure = BackPressure(limit: 100, canSuspend: false)
        #expect(!pressure.shouldSuspend(pendingBytes: 1 << 30))
        #expect(!pressure.suspended)
        #expect(!pressure.shouldResume(pendingBytes: 0))
    }

    @Test("the platform's answer")
    func platform() {
        #if canImport(FoundationNetworking)
        #expect(!BackPressure.platformCanSuspend)
        #else
        #expect(BackPressure.platformCanSuspend)
        #endif
    }
}
