import Foundation
import HotTestServers
import HotTesting
import Testing

/// The help of `hot`, each of its subcommands and the examples: the parser wraps every
/// paragraph to the terminal, so no sentence carries a line break of its own.
@Suite("help texts")
struct HelpTextTests {
    /// `executable`'s help for `arguments` as printed for a terminal `columns` wide.
    static func help(_ executable: String, _ arguments: [String], columns: Int) async throws -> String {
        let path = try builtExecutable(executable).path
        let output = try await Subprocess.check("env", ["COLUMNS=\(columns)", path] + arguments + ["--help"])
        return output.stdout
    }

    /// The subcommands `hot --help` lists.
    static func hotSubcommands() async throws -> [String] {
        let help = try await Self.help("hot", [], columns: 80)
        let section = try #require(help.components(separatedBy: "SUBCOMMANDS:\n").last)
        return section.split(separator: "\n").compactMap { line in
            // A subcommand's line starts with two spaces and its name; wrapped abstracts go on indented further.
            // The closing "See 'hot help <subcommand>'" line is not one.
            guard line.hasPrefix("  "), !line.hasPrefix("   "), let name = line.split(separator: " ").first,
                name.allSatisfy({ $0.isLowercase || $0 == "-" })
            else { return nil }
            return String(name)
        }
    }

    /// Every command whose help is checked: `hot`, its subcommands, the examples.
    static func commands() async throws -> [(executable: String, arguments: [String])] {
        let subcommands = try await hotSubcommands()
        #expect(subcommands.count >= 15, "\(subcommands)")
        return [("hot", [])] + subcommands.map { ("hot", [$0]) }
            + ["MinimalPatch", "ScriptPatches", "ResourcePacks", "WebOfflinePackages"].map { ($0, []) }
    }

    @Test("on a wide terminal every paragraph before USAGE is one line: no sentence breaks by itself")
    func paragraphsAreUnbroken() async throws {
        for (executable, arguments) in try await Self.commands() {
            let help = try await Self.help(executable, arguments, columns: 1_000)
            let overview = try #require(help.components(separatedBy: "USAGE:").first)
            let paragraphs = overview.components(separatedBy: "\n\n").map { $0.trimmingCharacters(in: .newlines) }
            for paragraph in paragraphs where paragraph.contains("\n") {
                Issue.record("\(([executable] + arguments).joined(separator: " ")): a line break inside \(paragraph)")
            }
            // Each option's help is one line too: beside its name, or below a long name.
            let options = try #require(help.components(separatedBy: "OPTIONS:\n").last)
            var entries: [[Substring]] = []
            for line in options.split(separator: "\n") {
                if !line.hasPrefix(" ") { break }  // the next section
                if line.hasPrefix("  -") || entries.isEmpty {
                    entries.append([line])
                } else {
                    entries[entries.count - 1].append(line)
                }
            }
            for entry in entries {
                let nameOnly = !entry[0].dropFirst(2).contains("  ")
                if entry.count > (nameOnly ? 2 : 1) {
                    Issue.record(
                        "\(([executable] + arguments).joined(separator: " ")): an option's help wraps: \(entry)"
                    )
                }
            }
        }
    }

    @Test("at 80 columns every line but the usage line fits")
    func fitsEightyColumns() async throws {
        for (executable, arguments) in try await Self.commands() {
            let help = try await Self.help(executable, arguments, columns: 80)
            for line in help.split(separator: "\n") where !line.hasPrefix("USAGE:") && line.count > 80 {
                Issue.record("\(([executable] + arguments).joined(separator: " ")): \(line.count) columns: \(line)")
            }
        }
    }
}
