/// The timed runs of one tool on one corpus and file system.
struct Samples: Sendable {
    private(set) var seconds: [Double] = []
    private(set) var peakRSS: [Int64] = []
    /// In-process times the tool reported (without its start-up), in seconds.
    private(set) var work: [Double] = []

    mutating func add(_ outcome: ChildOutcome, work reported: Double? = nil) {
        seconds.append(outcome.seconds)
        peakRSS.append(outcome.peakRSS)
        if let reported { work.append(reported) }
    }

    var isEmpty: Bool { seconds.isEmpty }

    /// The median wall time in milliseconds (the mean of the middle two for an even count).
    var medianMilliseconds: Double { Self.median(seconds) }

    /// The median in-process time in milliseconds, when the tool reported it on every run.
    var medianWorkMilliseconds: Double? {
        work.count == seconds.count && !work.isEmpty ? Self.median(work) : nil
    }

    private static func median(_ values: [Double]) -> Double {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return .nan }
        let middle = sorted.count / 2
        let value = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        return value * 1000
    }

    /// The fastest run in milliseconds.
    var minimumMilliseconds: Double { (seconds.min() ?? .nan) * 1000 }

    /// The highest peak RSS of any run, in MiB.
    var peakMegabytes: Double { Double(peakRSS.max() ?? 0) / mebibyte }
}

/// How one tool fared on one corpus and file system.
enum ToolResult: Sendable {
    case measured(Samples)
    /// It failed (started but exited non-zero, or produced a wrong tree); why.
    case failed(String)
    /// It is not installed here.
    case unavailable(String)

    var samples: Samples? {
        if case .measured(let samples) = self { return samples }
        return nil
    }
}
