import Foundation

/// One of the issue's targets, evaluated (never asserted) on one table.
struct Goal: Sendable {
    /// What is aimed at, e.g. "ZipUnarchiver ≤ 0.80× bsdtar".
    let statement: String
    /// What was measured, e.g. "0.62×".
    let measured: String
    /// Whether it was met; nil when a tool it needs did not run.
    let met: Bool?

    /// The goals that apply to one corpus on one file system:
    /// - tmpfs: ZipUnarchiver ≤ 0.8× bsdtar, LibArchiveUnarchiver ≤ 1.05× bsdtar, both ≤ 0.4× ZIPFoundation;
    /// - disk: both ≤ 1.1× `cp -r`;
    /// - the 200 MB corpus: ZipUnarchiver's peak RSS under 64 MB.
    static func evaluate(_ results: [ToolResult], tools: [ExtractionTool], fileSystem: String, large: Bool) -> [Goal] {
        func samples(_ id: String) -> Samples? {
            tools.firstIndex(where: { $0.id == id }).flatMap { results[$0].samples }
        }
        func label(_ id: String) -> String {
            switch id {
            case "zip": "ZipUnarchiver"
            case "libarchive": "LibArchiveUnarchiver"
            case "zipfoundation": "ZIPFoundation"
            case "cp": "cp -r"
            default: id
            }
        }
        func ratio(_ subject: String, _ reference: String, _ limit: Double) -> Goal {
            let statement = "\(label(subject)) ≤ \(String(format: "%.2f", limit))× \(label(reference))"
            guard let a = samples(subject), let b = samples(reference), b.medianMilliseconds > 0 else {
                return Goal(statement: statement, measured: "not measured", met: nil)
            }
            let value = a.medianMilliseconds / b.medianMilliseconds
            return Goal(statement: statement, measured: String(format: "%.2f×", value), met: value <= limit)
        }
        var goals: [Goal] = []
        if fileSystem == "tmpfs" {
            goals.append(ratio("zip", "bsdtar", 0.8))
            goals.append(ratio("libarchive", "bsdtar", 1.05))
            goals.append(ratio("zip", "zipfoundation", 0.4))
            goals.append(ratio("libarchive", "zipfoundation", 0.4))
        } else {
            goals.append(ratio("zip", "cp", 1.1))
            goals.append(ratio("libarchive", "cp", 1.1))
        }
        if large {
            let statement = "ZipUnarchiver peak RSS < 64 MB"
            if let zip = samples("zip") {
                goals.append(
                    Goal(
                        statement: statement,
                        measured: String(format: "%.1f MB", zip.peakMegabytes),
                        met: zip.peakMegabytes < 64
                    )
                )
            } else {
                goals.append(Goal(statement: statement, measured: "not measured", met: nil))
            }
        }
        return goals
    }

    /// "met", "MISSED" or "n/a".
    var verdict: String {
        switch met {
        case true?: "met"
        case false?: "MISSED"
        case nil: "n/a"
        }
    }
}
