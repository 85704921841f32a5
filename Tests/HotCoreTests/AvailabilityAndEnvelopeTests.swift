import Foundation
import HotCore
import HotTesting
import Testing

@Suite("Disable and enable with fakes")
struct AvailabilityTests {
    @Test("disabling keeps the files and stops resolving; enabling the same version downloads nothing")
    func disableThenEnable() async throws {
        let fixture = try EngineFixture()
        let images = try await fixture.publish("images", "1", ["a.png": "1"])
        _ = try await fixture.sync([images])
        let tree = try fixture.tree().filter { $0.key.hasPrefix("/packages/") }

        let disabled = try await fixture.updater.apply(Manifest(packages: [], disabledPackageIDs: ["images"]))
        #expect(disabled.packages.map(\.change) == [.disable])
        #expect(disabled.packages.first?.activeVersion == "1")
        #expect(try await fixture.updater.installedPackages().isEmpty)
        #expect(await fixture.store.snapshot.packages["images"]?.state == .disabled)
        #expect(try fixture.tree().filter { $0.key.hasPrefix("/packages/") } == tree)

        // Disabled again: nothing to do, nothing committed.
        let commits = await fixture.store.commitCount
        let again = try await fixture.updater.apply(Manifest(packages: [], disabledPackageIDs: ["images"]))
        #expect(again.packages.map(\.change) == [.unchanged])
        #expect(await fixture.store.commitCount == commits)

        let enabled = try await fixture.sync([images])
        #expect(enabled.packages.map(\.change) == [.enable])
        #expect(try await fixture.contents(of: "images", "a.png") == "1")
        #expect(await fixture.transport.requestCount(for: images.url) == 1)
    }

    @Test("a disabled package offered at another version is updated and active again")
    func disabledThenNewVersion() async throws {
        let fixture = try EngineFixture()
        let v1 = try await fixture.publish("images", "1", ["a.png": "1"])
        let v2 = try await fixture.publish("images", "2", ["a.png": "2"])
        _ = try await fixture.sync([v1])
        _ = try await fixture.updater.apply(Manifest(packages: [], disabledPackageIDs: ["images"]))
        let report = try await fixture.sync([v2])
        #expect(report.packages.map(\.change) == [.update])
        #expect(try await fixture.contents(of: "images", "a.png") == "2")
        #expect(await fixture.store.snapshot.packages["images"]?.state == .installed)
    }

    @Test("a package disabled before it was ever installed is not installed; a disabled id is not removed")
    func disabledNotInstalled() async throws {
        let fixture = try EngineFixture()
        let plan = try await fixture.updater.plan(for: Manifest(packages: [], disabledPackageIDs: ["never"]))
        #expect(plan.packages.isEmpty)
        #expect(throws: HotUpdateError(.manifestInvalid, "")) {
            try Manifest(packages: [try PackageDescriptor(id: "a", version: "1", url: URL(fileURLWithPath: "/a"))],
                         disabledPackageIDs: ["a"])
        }
    }
}

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

    @Test("ambiguous or malformed envelopes are refused", arguments: [
        #"{"signed": {"a": 1}, "signed": {"a": 2}, "signatures": []}"#,
        #"{"signed": {"a": 1}, "signatures": []} {"#,
        #"{"signed": "text", "signatures": []}"#,
        #"{"signed": {"a": "unterminated}, "signatures": []}"#,
        #"["signed"]"#,
        #"{"signatures": []}"#,
        #"{"signed": {"a": 1}, "signatures": [{"keyid": 1}]}"#,
    ])
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
            $0.versions = [.init(version: "1", url: "packages/app-1-abc.zip", size: 10, sha256: String(repeating: "a", count: 64))]
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
