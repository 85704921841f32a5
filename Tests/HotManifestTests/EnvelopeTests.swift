import Foundation
import HotCore
import HotManifest
import HotTesting
import Testing

@Suite("Signed envelope bytes")
struct EnvelopeTests {
    @Test("the signed part is cut out byte for byte, whatever the spacing and string contents")
    func exactBytes() throws {
        let signed = #"{ "a" : "}\"{[" ,"b":[1, {"c": null}] , "d": -1500 }"#
        let document = "\n{\"signatures\" : [ {\"keyid\":\"k\",\"sig\":\"00\"} ],\n\t\"signed\":\(signed)  }\n"
        let envelope = try SignedEnvelope.parse(Data(document.utf8))
        #expect(String(decoding: envelope.signed, as: UTF8.self) == signed)
        #expect(envelope.signatures == [.init(keyid: "k", sig: "00")])
        // And what we write parses back to the same bytes.
        #expect(try SignedEnvelope.parse(envelope.encoded()) == envelope)
    }

    @Test(
        "ambiguous or malformed envelopes are refused",
        arguments: [
            (#"{"signed": {"a": 1}, "signed": {"a": 2}, "signatures": []}"#, HotUpdateError.Code.manifestDuplicateKey),
            (#"{"signed": {"a": 1, "b": {"c": 1, "\u0063": 2}}, "signatures": []}"#, .manifestDuplicateKey),
            (#"{"signed": {"a": 1}, "signatures": []} {"#, .manifestNotJSON),
            (#"{"signed": "text", "signatures": []}"#, .manifestInvalid),
            (#"{"signed": {"a": "unterminated}, "signatures": []}"#, .manifestNotJSON),
            (#"{"signed": {"a": "unterminated"#, .manifestTruncated),
            (#"{"signed": {"a": 1}, "#, .manifestTruncated),
            (#"["signed"]"#, .notAManifest),
            (#"{"signatures": []}"#, .notAManifest),
            (#"{"signed": {"a": 1}, "signatures": [{"keyid": 1}]}"#, .manifestInvalid),
            (#"{"signed": {"a": 9007199254740992}, "signatures": []}"#, .manifestNumberOutOfRange),
            (#"{"signed": {"a": -9007199254740991, "b": 1e3}, "signatures": []}"#, .manifestNumberOutOfRange),
            (#"{"signed": {"a": 01}, "signatures": []}"#, .manifestNotJSON),
            (#"{"signed": {"a": "\x"}, "signatures": []}"#, .manifestNotJSON),
            (#"{"signed": {"a": "\ud800"}, "signatures": []}"#, .manifestNotJSON),
            (#"{"signed": {"a": tru}, "signatures": []}"#, .manifestNotJSON),
            (#"{"signed": {"ab": 1, "a\u0062": 2}, "signatures": []}"#, .manifestDuplicateKey),
            ("{\"signed\": {\"a\": \"x\ny\"}, \"signatures\": []}", .manifestNotJSON),
            (#"{"signed": {"a": -9007199254740992}, "signatures": []}"#, .manifestNumberOutOfRange),
            (#"{"signed": {"a": 123456789012345678901234567890}, "signatures": []}"#, .manifestNumberOutOfRange),
            ("<html>502</html>", .manifestNotJSON),
            ("", .manifestTruncated),
            (String(repeating: "[", count: 65) + String(repeating: "]", count: 65), .manifestTooDeep),
            (#"{"schema": 1, "packages": []}"#, .manifestUnsigned),
        ]
    )
    func refused(document: String, code: HotUpdateError.Code) {
        let error = #expect(throws: HotUpdateError.self) { try SignedEnvelope.parse(Data(document.utf8)) }
        #expect(error?.code == code, "\(document): \(String(describing: error))")
    }

    @Test("the strict reader accepts what every parser reads alike: escapes, the integer range, nesting to 64")
    func strictReaderAccepts() throws {
        let nested = String(repeating: "[", count: 60) + String(repeating: "]", count: 60)
        let document =
            #"{"signed": {"a": "caf\u00e9 \ud83d\ude00 \"q\" \\ \/", "b": [9007199254740991, -0, 0, "#
            + nested + #"], "c": {"a": 1}, "d": true, "e": null}, "signatures": []}"#
        let envelope = try SignedEnvelope.parse(Data(document.utf8))
        #expect(envelope.signatures.isEmpty)
        #expect(String(decoding: envelope.signed, as: UTF8.self).hasPrefix(#"{"a": "caf"#))
    }

    @Test("bytes that are not UTF-8 in a string are refused, with or without an escape before them")
    func notUTF8() {
        for prefix in ["", #"\n"#] {
            var document = Data(#"{"signed": {"a": ""#.utf8)
            document.append(contentsOf: Array(prefix.utf8) + [0xC3, 0x28])
            document.append(contentsOf: Array(#""}, "signatures": []}"#.utf8))
            let error = #expect(throws: HotUpdateError.self) { try SignedEnvelope.parse(document) }
            #expect(
                error?.code == .manifestNotJSON && error?.message.contains("UTF-8") == true,
                "\(String(describing: error))"
            )
        }
    }

    @Test("a document that is a slice of a larger buffer is read from its own first byte")
    func slice() throws {
        let signed = #"{"a": "caf\u00e9", "b": [1, 2]}"#
        let buffer = Data(("garbage{" + #"{"signatures": [], "signed": "# + signed + "}").utf8)
        let document = buffer[buffer.index(buffer.startIndex, offsetBy: 8)...]
        let envelope = try SignedEnvelope.parse(document)
        #expect(String(decoding: envelope.signed, as: UTF8.self) == signed)
        // Offsets in errors count from the document's first byte too.
        let bad = Data("garbage{\"signed\": 01}".utf8)
        let error = #expect(throws: HotUpdateError.self) {
            try SignedEnvelope.parse(bad[bad.index(bad.startIndex, offsetBy: 7)...])
        }
        #expect(error?.message.contains("at byte 12") == true, "\(String(describing: error))")
    }

    @Test("an HTML page is reported as not JSON, with its first bytes escaped")
    func htmlShowsItsStart() {
        let error = #expect(throws: HotUpdateError.self) {
            try SignedEnvelope.parse(Data("<!DOCTYPE html>\n<title>502</title>".utf8))
        }
        #expect(
            error?.message.contains(#""<!DOCTYPE html>\n<title>502</title>""#) == true,
            "\(String(describing: error))"
        )
    }

    @Test("app versions compare by number, component by component")
    func appVersions() {
        #expect(AppVersion("5.10") > AppVersion("5.9"))
        #expect(AppVersion("5.2") == AppVersion("5.2.0"))
        #expect(AppVersion("6") < AppVersion("6.0.1"))
        #expect(AppVersion("10") > AppVersion("9.99"))
    }

    @Test("the signed body round-trips through its canonical bytes, with an RFC 3339 expiry")
    func bodyRoundTrip() throws {
        var body = SignedManifestBody(version: 3, expires: Date(timeIntervalSince1970: 1_800_000_000), channel: "beta")
        body.editPackage("app") {
            $0.versions = [
                .init(version: "1", url: "packages/app-1-abc.zip", size: 10, sha256: String(repeating: "a", count: 64))
            ]
            $0.releases = ["1"]
            $0.rollout = 10
        }
        let bytes = try body.canonicalBytes()
        #expect(String(decoding: bytes, as: UTF8.self).contains(#""expires" : "2027-01-15T08:00:00Z""#))
        #expect(try SignedManifestBody.decode(bytes) == body)
        #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try SignedManifestBody.decode(Data(#"{"_type": "other", "schema": 2}"#.utf8))
        }
    }
}
