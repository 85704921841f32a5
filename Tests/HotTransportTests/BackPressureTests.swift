import Testing

@testable import HotTransport

/// URLSessionTransport's suspend/resume decision, run here with Apple's answer to "can a
/// running task be suspended" as well as Linux's.
@Suite("URLSession back-pressure")
struct BackPressureTests {
    @Test("Apple: suspends once past the limit, once, and resumes at half of it")
    func suspendsAndResumes() {
        var pressure = BackPressure(limit: 100, canSuspend: true)
        var answers: [Bool] = []
        answers.append(pressure.shouldSuspend(pendingBytes: 100))
        answers.append(pressure.shouldSuspend(pendingBytes: 101))
        #expect(pressure.suspended)
        answers.append(pressure.shouldSuspend(pendingBytes: 500))
        answers.append(pressure.shouldResume(pendingBytes: 51))
        answers.append(pressure.shouldResume(pendingBytes: 50))
        #expect(!pressure.suspended)
        answers.append(pressure.shouldResume(pendingBytes: 0))
        answers.append(pressure.shouldSuspend(pendingBytes: 101))
        #expect(answers == [false, true, false, false, true, false, true])
    }

    @Test("FoundationNetworking: never suspends, so never resumes")
    func neverSuspends() {
        var pressure = BackPressure(limit: 100, canSuspend: false)
        let suspend = pressure.shouldSuspend(pendingBytes: 1 << 30)
        let resume = pressure.shouldResume(pendingBytes: 0)
        #expect(!suspend && !resume && !pressure.suspended)
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
