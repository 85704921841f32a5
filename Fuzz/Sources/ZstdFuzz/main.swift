// A libFuzzer target over `ZstdDecoder`, HotArchive's own zstd decoder, with libzstd (the
// system library, through the `CZstdOracle` target) as the oracle.
//
// Each input is decoded twice over:
//
// 1. whole, as one or more frames, with no dictionary;
// 2. split as `[flags: u8][length: u16 LE][dictionary: length bytes][frames...]`: with
//    `flags & 1 == 0` the dictionary is raw content (`ZstdDictionary.prefix`, what
//    `zstd --patch-from` makes), otherwise it is read as `zstd -D` reads it (`ZstdDictionary(_:)`:
//    a formatted dictionary when it starts with the dictionary magic, raw content otherwise).
//
// In both, our decoder runs under small limits (window ≤ 8 MiB, output ≤ 64 MiB) through the
// sink API and the `Data` API, and libzstd under the same limits (`ZSTD_d_windowLogMax` 23, an
// output buffer of 64 MiB + 1). The harness calls `abort()` (a crash for libFuzzer, with
// `ZSTDFUZZ VIOLATION: …` in the log) when:
//
// - our decoder throws anything but a `HotUpdateError`, or `.internalInconsistency`;
// - both accept the input and their bytes differ;
// - ours accepts output over the limit, or a frame whose window libzstd refuses as over 8 MiB;
// - the sink API and the `Data` API disagree (bytes, or success and failure);
// - with `ZSTDFUZZ_STRICT=1`, libzstd accepts an input ours refuses.
//
// Without `ZSTDFUZZ_STRICT`, an input libzstd accepts and ours refuses (or the reverse) is saved
// in `$ZSTDFUZZ_DIVERGENCES` (at most 1,000 files) and counted, not a crash: libzstd 1.5.4 (Debian
// 12's) still accepts frames the format forbids, which later versions refuse (the golden files of
// `golden-decompression-errors`), and refuses one that later versions accept (`zeroSeq_2B`), so
// each divergence is triaged by reading the format (Fuzz/README.md).
//
// Built with `-sanitize=fuzzer,address` (see `scripts/fuzz zstd` and `Fuzz/README.md`).

import CLibFuzzer
import CZstdOracle
import Foundation
import Glibc
import HotArchive
import HotCore

let maxWindowLog = 23
let limits = ZstdDecoder.Limits(maxWindowBytes: 1 << maxWindowLog, maxOutputBytes: 64 << 20)
let strict = ProcessInfo.processInfo.environment["ZSTDFUZZ_STRICT"] == "1"
let divergences = ProcessInfo.processInfo.environment["ZSTDFUZZ_DIVERGENCES"].flatMap { $0.isEmpty ? nil : $0 }

/// libzstd's output buffer, one byte over the limit, allocated once.
let oracleCapacity = Int(limits.maxOutputBytes) + 1
nonisolated(unsafe) let oracleBuffer = UnsafeMutableRawPointer.allocate(byteCount: oracleCapacity, alignment: 16)

/// Counts of what the inputs led to, printed when the fuzzer exits.
nonisolated(unsafe) var outcomes: [String: Int] = [:]
nonisolated(unsafe) var savedDivergences = 0

func violation(_ reason: String) -> Never {
    FileHandle.standardError.write(Data("\nZSTDFUZZ VIOLATION: \(reason)\n".utf8))
    abort()
}

/// What one decoder made of one input.
enum Verdict {
    case decoded(Data)
    case refused(String)
}

/// Our decoder through the sink API, checking each piece against the limit as it comes.
func oursStreaming(_ frames: UnsafeRawBufferPointer, _ dictionary: ZstdDictionary?) -> Result<Data, HotUpdateError> {
    var output = Data()
    do {
        try ZstdDecoder(limits: limits).decode(frames, dictionary: dictionary) { piece in
            output.append(contentsOf: piece)
            if output.count > limits.maxOutputBytes {
                violation("the sink received \(output.count) bytes, over the limit of \(limits.maxOutputBytes)")
            }
        }
        return .success(output)
    } catch {
        return .failure(typed(error, "decode(_:dictionary:output:)"))
    }
}

/// Our decoder through the `Data` API.
func oursData(_ frames: UnsafeRawBufferPointer, _ dictionary: ZstdDictionary?) -> Result<Data, HotUpdateError> {
    do {
        return .success(try ZstdDecoder(limits: limits).decode(Data(frames), dictionary: dictionary))
    } catch {
        return .failure(typed(error, "decode(_:dictionary:)"))
    }
}

func typed(_ error: any Error, _ call: String) -> HotUpdateError {
    guard let hot = error as? HotUpdateError else {
        violation("\(call) threw a \(type(of: error)), not a HotUpdateError: \(error)")
    }
    if hot.code == .internalInconsistency {
        violation("\(call) reported an internal inconsistency: \(hot.detailedDescription())")
    }
    return hot
}

/// Saves an input on which the two decoders disagree, for triage, with what ours decoded
/// (`.ours`, up to 1 MiB) when it decoded it.
func saveDivergence(_ input: UnsafeRawBufferPointer, _ note: String, ours: Data? = nil) {
    guard let folder = divergences, savedDivergences < 1_000 else { return }
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in input { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
    let name = folder + "/divergence-" + String(hash, radix: 16)
    guard !FileManager.default.fileExists(atPath: name) else { return }
    FileManager.default.createFile(atPath: name, contents: Data(input))
    FileManager.default.createFile(atPath: name + ".txt", contents: Data((note + "\n").utf8))
    if let ours, ours.count <= 1 << 20 { FileManager.default.createFile(atPath: name + ".ours", contents: ours) }
    savedDivergences += 1
}

/// Decodes `frames` both ways and checks they agree.
func check(
    _ mode: String,
    frames: UnsafeRawBufferPointer,
    dictionary: ZstdDictionary?,
    oracleMode: Int32,
    input: UnsafeRawBufferPointer
) {
    let streamed = oursStreaming(frames, dictionary)
    let whole = oursData(frames, dictionary)
    switch (streamed, whole) {
    case (.success(let a), .success(let b)) where a != b:
        violation("\(mode): the sink API gave \(a.count) bytes, the Data API \(b.count) different ones")
    case (.success(let a), .failure(let error)):
        violation("\(mode): the sink API decoded \(a.count) bytes, the Data API threw \(error.detailedDescription())")
    case (.failure(let error), .success(let b)):
        violation("\(mode): the Data API decoded \(b.count) bytes, the sink API threw \(error.detailedDescription())")
    case (.failure(let a), .failure(let b)) where a.code != b.code:
        violation("\(mode): the sink API threw \(a.code), the Data API \(b.code)")
    default:
        break
    }

    let dictionaryBytes = dictionary?.data ?? Data()
    let oracle = dictionaryBytes.withUnsafeBytes { dictionaryBuffer in
        zstd_oracle_decode(
            frames.baseAddress,
            frames.count,
            dictionaryBuffer.baseAddress,
            dictionaryBuffer.count,
            oracleMode,
            Int32(maxWindowLog),
            oracleBuffer,
            oracleCapacity
        )
    }
    let oracleError = oracle.error.map { String(cString: $0) } ?? ""
    switch (streamed, Int(oracle.status)) {
    case (.success(let ours), Int(ZSTD_ORACLE_OK)):
        let same = ours.withUnsafeBytes { bytes in
            guard bytes.count == oracle.size else { return false }
            guard let start = bytes.baseAddress, bytes.count > 0 else { return true }
            return memcmp(start, oracleBuffer, bytes.count) == 0
        }
        if !same {
            let firstDifference = ours.withUnsafeBytes { bytes in
                (0..<min(bytes.count, oracle.size)).first {
                    bytes[$0] != oracleBuffer.load(fromByteOffset: $0, as: UInt8.self)
                }
            }
            violation(
                "\(mode): ours decoded \(ours.count) bytes, libzstd \(oracle.size) bytes; first difference at \(firstDifference.map(String.init) ?? "the end of the shorter")"
            )
        }
        outcomes["\(mode): both decode", default: 0] += 1
    case (.success(let ours), Int(ZSTD_ORACLE_OVER_LIMIT)):
        violation("\(mode): libzstd decodes more than \(limits.maxOutputBytes) bytes, ours accepted \(ours.count)")
    case (.success(let ours), Int(ZSTD_ORACLE_WINDOW_TOO_LARGE)):
        violation(
            "\(mode): libzstd refuses a window over \(limits.maxWindowBytes) bytes, ours decoded \(ours.count) bytes"
        )
    case (.success(let ours), _):
        outcomes["\(mode): ours decodes, libzstd refuses (\(oracleError))", default: 0] += 1
        saveDivergence(input, "\(mode): ours decoded \(ours.count) bytes, libzstd refused: \(oracleError)", ours: ours)
    case (.failure(let error), Int(ZSTD_ORACLE_OK)):
        let note = "\(mode): libzstd decoded \(oracle.size) bytes, ours refused: \(error.detailedDescription())"
        if strict { violation(note) }
        outcomes["\(mode): libzstd decodes, ours refuses (\(error.code))", default: 0] += 1
        saveDivergence(input, note)
    case (.failure(let error), let status):
        if status == Int(ZSTD_ORACLE_OVER_LIMIT) || status == Int(ZSTD_ORACLE_WINDOW_TOO_LARGE) {
            outcomes["\(mode): both refuse, libzstd over a limit; ours \(error.code)", default: 0] += 1
        } else {
            outcomes["\(mode): both refuse; ours \(error.code)", default: 0] += 1
        }
    }
}

/// One input.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    check("whole", frames: input, dictionary: nil, oracleMode: Int32(ZSTD_ORACLE_NO_DICTIONARY), input: input)
    guard input.count >= 3 else { return }
    let flags = input[0]
    let length = min(Int(input[1]) | Int(input[2]) << 8, input.count - 3)
    let dictionaryBytes = Data(UnsafeRawBufferPointer(rebasing: input[3..<(3 + length)]))
    let frames = UnsafeRawBufferPointer(rebasing: input[(3 + length)...])
    if flags & 1 == 0 {
        check(
            "prefix",
            frames: frames,
            dictionary: .prefix(dictionaryBytes),
            oracleMode: Int32(ZSTD_ORACLE_RAW_CONTENT),
            input: input
        )
    } else {
        check(
            "dictionary",
            frames: frames,
            dictionary: ZstdDictionary(dictionaryBytes),
            oracleMode: Int32(ZSTD_ORACLE_AUTO),
            input: input
        )
    }
}

@_cdecl("LLVMFuzzerTestOneInput")
public func testOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    fuzzOne(UnsafeRawBufferPointer(start: data, count: data == nil ? 0 : size))
    return 0
}

atexit {
    let lines = outcomes.sorted { $0.key < $1.key }.map { "  \($0.key): \($0.value)" }
    FileHandle.standardError.write(
        Data(
            "zstdfuzz outcomes (libzstd \(String(cString: zstd_oracle_version()))):\n\(lines.joined(separator: "\n"))\n"
                .utf8
        )
    )
}
var argc = CommandLine.argc
var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
exit(LLVMFuzzerRunDriver(&argc, &argv, testOneInput))
