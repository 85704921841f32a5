import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// What the numbers were measured on.
enum Machine {
    /// Lines describing the machine: date, cores, kernel, CPU, memory.
    static func description() -> [String] {
        var lines: [String] = []
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime]
        lines.append("date: \(formatter.string(from: Date()))")
        lines.append("cores: \(ProcessInfo.processInfo.activeProcessorCount) (nproc)")
        var names = utsname()
        if uname(&names) == 0 {
            lines.append("kernel: \(field(names.sysname)) \(field(names.release)) \(field(names.machine))")
        }
        if let cpu = cpuModel() { lines.append("cpu: \(cpu)") }
        let gib = Double(ProcessInfo.processInfo.physicalMemory) / 1_073_741_824
        lines.append("memory: \(String(format: "%.1f", gib)) GiB")
        return lines
    }

    /// A NUL-terminated `char[]` field of a C struct, as a string.
    private static func field<T>(_ value: T) -> String {
        withUnsafeBytes(of: value) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
    }

    private static func cpuModel() -> String? {
        guard let text = try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8) else { return nil }
        for line in text.split(separator: "\n") where line.hasPrefix("model name") {
            if let colon = line.firstIndex(of: ":") {
                return line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    /// The file-system type holding `path` (from `/proc/self/mounts`: the longest mount
    /// point that contains it), or nil where that file does not exist.
    static func fileSystemType(of path: String) -> String? {
        guard let text = try? String(contentsOfFile: "/proc/self/mounts", encoding: .utf8) else { return nil }
        var resolved = path
        if let real = realpath(path, nil) {
            resolved = String(cString: real)
            free(real)
        }
        var best: (point: String, type: String)?
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ")
            guard fields.count >= 3 else { continue }
            let point = String(fields[1]).replacingOccurrences(of: "\\040", with: " ")
            let inside = point == "/" || resolved == point || resolved.hasPrefix(point + "/")
            if inside && point.count >= (best?.point.count ?? -1) { best = (point, String(fields[2])) }
        }
        return best?.type
    }
}
