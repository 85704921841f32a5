/// A text table, printed aligned for a terminal or as Markdown.
struct Table {
    enum Alignment { case left, right }

    let headers: [String]
    let alignments: [Alignment]
    var rows: [[String]] = []

    init(_ columns: [(String, Alignment)]) {
        headers = columns.map(\.0)
        alignments = columns.map(\.1)
    }

    mutating func add(_ row: [String]) { rows.append(row) }

    func render(markdown: Bool) -> String {
        if markdown {
            var lines = ["| " + headers.joined(separator: " | ") + " |"]
            lines.append("|" + alignments.map { $0 == .left ? " --- |" : " ---: |" }.joined())
            for row in rows { lines.append("| " + row.joined(separator: " | ") + " |") }
            return lines.joined(separator: "\n")
        }
        var widths = headers.map(\.count)
        for row in rows {
            for (index, cell) in row.enumerated() where index < widths.count {
                widths[index] = max(widths[index], cell.count)
            }
        }
        func line(_ cells: [String]) -> String {
            cells.enumerated().map { index, cell in
                let pad = String(repeating: " ", count: max(0, widths[index] - cell.count))
                return alignments[index] == .left ? cell + pad : pad + cell
            }.joined(separator: "   ").replacingTrailingSpaces()
        }
        return ([line(headers)] + rows.map(line)).joined(separator: "\n")
    }
}

extension String {
    fileprivate func replacingTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}
