import Foundation

/// Prints the benchmark's output on stdout, as plain text or Markdown.
struct Report {
    let markdown: Bool

    private func emit(_ text: String = "") {
        FileHandle.standardOutput.write(Data((text + "\n").utf8))
    }

    private func heading(_ text: String, level: Int) {
        if markdown {
            emit(String(repeating: "#", count: level) + " " + text)
        } else {
            emit(level <= 2 ? "== \(text) ==" : "-- \(text) --")
        }
        emit()
    }

    private func list(_ lines: [String]) {
        for line in lines { emit(markdown ? "- " + line : "  " + line) }
        emit()
    }

    func header(machine: [String], tools: [String], startup: [String], settings: [String]) {
        heading("hot-bench: ZIP extraction and packing", level: 2)
        list(machine)
        if !tools.isEmpty { list(tools) }
        var lines = settings
        if !startup.isEmpty {
            lines.append("process start-up alone (median of 5, peak RSS): " + startup.joined(separator: ", "))
        }
        list(lines)
    }

    func section(
        heading text: String,
        detail: [String],
        extraction: [ToolResult],
        tools: [ExtractionTool],
        runs: Int,
        packing: [(result: ToolResult, archiveBytes: Int64)]?,
        packers: [PackingTool],
        packRuns: Int,
        goals: [Goal]
    ) {
        heading(text, level: 3)
        list(detail)
        emit("Extraction (\(runs) runs each; wall time spawn→exit; peak RSS of the child):")
        emit()
        let bsdtar = tools.firstIndex(where: { $0.id == "bsdtar" }).flatMap { extraction[$0].samples }
        var table = Table([
            ("tool", .left), ("median ms", .right), ("min ms", .right), ("× bsdtar", .right), ("peak RSS MB", .right),
            ("in-process ms", .right),
        ])
        var notes: [String] = []
        for (tool, result) in zip(tools, extraction) {
            var cells = row(tool.label, result, reference: bsdtar, notes: &notes)
            cells.append(result.samples?.medianWorkMilliseconds.map { String(format: "%.1f", $0) } ?? "")
            table.add(cells)
        }
        emit(table.render(markdown: markdown))
        emit()
        if !notes.isEmpty { list(notes) }
        if let packing {
            emit("Packing (\(packRuns) runs each; ZipWriter flushes its archive with fsync, zip and bsdtar do not):")
            emit()
            let zipCLI = packers.firstIndex(where: { $0.id == "zip" }).flatMap { packing[$0].result.samples }
            var table = Table([
                ("tool", .left), ("median ms", .right), ("min ms", .right), ("× zip -r", .right),
                ("peak RSS MB", .right), ("archive MB", .right),
            ])
            var notes: [String] = []
            for (tool, entry) in zip(packers, packing) {
                var cells = row(tool.label, entry.result, reference: zipCLI, notes: &notes)
                cells.append(
                    entry.result.samples == nil ? "" : String(format: "%.1f", Double(entry.archiveBytes) / mebibyte)
                )
                table.add(cells)
            }
            emit(table.render(markdown: markdown))
            emit()
            if !notes.isEmpty { list(notes) }
        }
        emit("Goals (evaluated, not asserted):")
        emit()
        list(goals.map(goalLine))
    }

    func summary(_ sections: [(String, [Goal])]) {
        heading("Goals, all tables", level: 3)
        list(sections.flatMap { name, goals in goals.map { "\(name): " + goalLine($0) } })
    }

    private func goalLine(_ goal: Goal) -> String {
        let verdict = markdown ? "**\(goal.verdict)**" : goal.verdict.padding(toLength: 6, withPad: " ", startingAt: 0)
        return "\(verdict) \(goal.statement): \(goal.measured)"
    }

    private func row(_ label: String, _ result: ToolResult, reference: Samples?, notes: inout [String]) -> [String] {
        switch result {
        case .measured(let samples):
            let ratio =
                reference.map { String(format: "%.2f", samples.medianMilliseconds / $0.medianMilliseconds) } ?? "–"
            return [
                label, String(format: "%.1f", samples.medianMilliseconds),
                String(format: "%.1f", samples.minimumMilliseconds),
                ratio, String(format: "%.1f", samples.peakMegabytes),
            ]
        case .failed(let why):
            notes.append("\(label) failed: \(why)")
            return [label, "failed", "", "", ""]
        case .unavailable(let why):
            notes.append("\(label) skipped: \(why)")
            return [label, "skipped", "", "", ""]
        }
    }
}
