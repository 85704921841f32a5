import Foundation
import HotCore
import HotManifest
import HotTesting
import Testing

@Suite("Signed envelope bytes")
struct EnvelopeTests {
    @Test("the signed part is cut out byte for byte, whatever the spacing and string contents")
    func exactBytes() throws {
        let signed = #"{ "a" : "}\"{[" ,"b":[1, {"c": null}] , "d": -1.5e3 }"#
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
            #"{"signed": {"a": 1}, "signed": {"a": 2}, "signatures": []}"#,
            #"{"signed": {"a": 1}, "signatures": []} {"#,
            #"{"signed": "text", "signatures": []}"#,
            #"{"signed": {"a": "unterminated}, "signatures": []}"#,
            #"["signed"]"#,
            #"{"signatures": []}"#,
            #"{"signed": {"a": 1}, "signatures": [{"keyid": 1}]}"#,
        ]
    )
    func refused(document: String) {
        #expect(throws: HotUpdateError(.manifestInvalid, "")) { try SignedEnvelope.parse(Data(document.utf8)) }
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
