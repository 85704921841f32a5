import Foundation
import HotCore
import HotManifest
import HotTesting
import Testing

@Suite("Offline-package check")
struct OfflinePackageSourceTests {
    let checkURL = URL(string: "https://h5.test/offline/check")!
    let app = OfflinePackageManifestSource.App(appCode: "SomeApp", appVersion: "1.2.0", platform: "ios")
    let md5A = String(repeating: "ab", count: 16)
    let md5B = String(repeating: "cd", count: 16)

    func source(
        _ transport: FakeTransport,
        installed: [OfflinePackageManifestSource.InstalledModule] = []
    )
        -> OfflinePackageManifestSource
    {
        OfflinePackageManifestSource(url: checkURL, transport: transport, app: app, installedModules: { installed })
    }

    @Test("posts {data: {appCode, appVer, platform, h5vers}} as JSON with what is installed")
    func requestBody() async throws {
        let transport = FakeTransport()
        await transport.serve(Data(#"{"resultData": []}"#.utf8), at: checkURL)
        let installed = [
            OfflinePackageManifestSource.InstalledModule(moduleId: "10010", moduleVer: "1.0.4", isActive: true),
            OfflinePackageManifestSource.InstalledModule(moduleId: "10030", moduleVer: "1.0.8", isActive: false),
        ]
        let check = try await source(transport, installed: installed).check()
        #expect(check.reported == installed)
        #expect(check.manifest.packages.isEmpty)

        let requests = await transport.receivedRequests
        #expect(requests.count == 1)
        let request = try #require(requests.first)
        #expect(request.method == "POST")
        #expect(request.headers["Content-Type"] == "application/json")
        let body = try #require(request.body)
        let json = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        let data = try #require(json["data"] as? [String: Any])
        #expect(data["appCode"] as? String == "SomeApp")
        #expect(data["appVer"] as? String == "1.2.0")
        #expect(data["platform"] as? String == "ios")
        let versions = try #require(data["h5vers"] as? [[String: Any]])
        #expect(versions.map { $0["moduleId"] as? String } == ["10010", "10030"])
        #expect(versions.map { $0["moduleVer"] as? String } == ["1.0.4", "1.0.8"])
        #expect(versions.map { $0["isActive"] as? Bool } == [true, false])
    }

    @Test("the request can go without the data wrapper")
    func unwrapped() throws {
        var source = source(FakeTransport())
        source.wrapsRequestInData = false
        let body = try source.requestBody(reporting: [])
        let json = try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any])
        #expect(json["data"] == nil)
        #expect(json["appCode"] as? String == "SomeApp")
    }

    @Test("the installed modules come from a store snapshot; disabled ones are reported inactive")
    func fromSnapshot() {
        let date = Date(timeIntervalSince1970: 0)
        func version(_ v: String) -> InstalledVersion {
            InstalledVersion(
                version: v,
                path: "packages/x/\(v)",
                archiveSize: 1,
                sha256: nil,
                md5: nil,
                sourceURL: "",
                installedAt: date
            )
        }
        let snapshot = StoreSnapshot(packages: [
            "10020": PackageRecord(id: "10020", state: .disabled, active: version("1.0.2")),
            "10010": PackageRecord(id: "10010", state: .installed, active: version("1.0.4")),
            "fonts": PackageRecord(id: "fonts", state: .installed, active: version("7")),
            "never": PackageRecord(id: "never", state: .failed, active: nil),
        ])
        let all = OfflinePackageManifestSource.installedModules(in: snapshot)
        #expect(all.map(\.moduleId) == ["10010", "10020", "fonts"])
        #expect(all.map(\.isActive) == [true, false, true])
        let modules = OfflinePackageManifestSource.installedModules(in: snapshot, only: ["10010", "10020"])
        #expect(
            modules == [
                .init(moduleId: "10010", moduleVer: "1.0.4", isActive: true),
                .init(moduleId: "10020", moduleVer: "1.0.2", isActive: false),
            ]
        )
    }

    @Test("full, patch and inactive modules: inactive ones download nothing")
    func answer() throws {
        let json = """
            {"resultCode": 0, "resultData": [
              {"moduleId": "10010", "packageUrl": "https://cdn.test/aa.zip", "packageMD5": "\(md5A)",
               "patchUrl": "https://cdn.test/aa.patch", "patchMD5": "\(md5B)", "mode": 1, "isActive": true},
              {"moduleId": 10020, "moduleVer": "1.0.3", "packageUrl": "pkg/bb.zip", "packageMD5": "\(md5B.uppercased())",
               "patchUrl": "pkg/bb.patch", "patchMD5": "\(md5A)", "mode": "patch", "isActive": 1},
              {"moduleId": "10030", "packageUrl": "https://cdn.test/cc.zip", "packageMD5": "\(md5A)",
               "patchUrl": "", "patchMD5": "", "mode": 1, "isActive": false}
            ]}
            """
        let check = try OfflinePackageManifestSource.parseAnswer(Data(json.utf8), relativeTo: checkURL)
        #expect(!check.manifest.isComplete)
        #expect(check.manifest.packages.map(\.id) == ["10010", "10020"])
        #expect(
            check.manifest.packages.map(\.url.absoluteString) == [
                "https://cdn.test/aa.zip", "https://h5.test/offline/pkg/bb.zip",
            ]
        )
        #expect(check.manifest.packages.map(\.version) == [md5A, "1.0.3"])
        #expect(check.manifest.packages.map { $0.md5?.hex } == [md5A, md5B])
        #expect(check.modules.map(\.requestedMode) == [.full, .patch, .full])
        #expect(check.modules[1].patchURL?.absoluteString == "https://h5.test/offline/pkg/bb.patch")
        #expect(check.manifest.packages[1].deltas.isEmpty, "nothing installed: nothing to patch")
        #expect(check.modules[2].package == nil)
        #expect(check.inactiveModuleIDs == ["10030"])
    }

    @Test(
        "an answer that is not a list of modules is refused with manifestInvalid",
        arguments: ["not json", #"{"data": []}"#]
    )
    func malformed(json: String) {
        let error = #expect(throws: HotUpdateError.self) {
            try OfflinePackageManifestSource.parseAnswer(Data(json.utf8), relativeTo: checkURL)
        }
        #expect(error?.code == .manifestInvalid)
    }

    @Test(
        "a malformed module fails alone: left out with manifestInvalid in refused, the module beside it installs",
        arguments: [
            #"{"packageUrl": "a.zip", "packageMD5": "\#(String(repeating: "ab", count: 16))"}"#,
            #"{"moduleId": "../x", "packageUrl": "a.zip", "packageMD5": "\#(String(repeating: "ab", count: 16))"}"#,
            #"{"moduleId": "m", "packageMD5": "\#(String(repeating: "ab", count: 16))", "isActive": true}"#,
            #"{"moduleId": "m", "packageUrl": "a.zip", "isActive": true}"#,
            #"{"moduleId": "m", "packageUrl": "a.zip", "packageMD5": "adfadfadfadfadfadfadfadf"}"#,
            #"{"moduleId": "m", "packageUrl": "a.zip", "packageMD5": "\#(String(repeating: "ab", count: 16))", "mode": 3}"#,
            #"{"moduleId": "m", "packageUrl": "a.zip", "packageMD5": "\#(String(repeating: "ab", count: 16))", "isActive": "maybe"}"#,
            #"{"moduleId": "m", "mode": 2, "patchUrl": "p.bin", "patchMD5": "\#(String(repeating: "ab", count: 16))"}"#,
            #"{"moduleId": "ok", "packageUrl": "b.zip", "packageMD5": "\#(String(repeating: "ab", count: 16))"}"#,
        ]
    )
    func malformedModule(module: String) throws {
        let json = #"{"resultData": [\#(module), GOOD]}"#.replacingOccurrences(
            of: "GOOD",
            with: #"{"moduleId": "ok", "packageUrl": "ok.zip", "packageMD5": "\#(String(repeating: "cd", count: 16))"}"#
        )
        let check = try OfflinePackageManifestSource.parseAnswer(Data(json.utf8), relativeTo: checkURL)
        #expect(check.manifest.packages.map(\.id) == ["ok"])
        #expect(check.refused.map(\.code) == [.manifestInvalid])
    }

    @Test(
        "patch mode lists the patch as a delta from the reported version; a bad patchMD5 of an inactive module refuses nothing"
    )
    func patchMode() throws {
        let json = """
            {"resultData": [
              {"moduleId": "home", "moduleVer": "2", "packageUrl": "home-2.zip", "packageMD5": "\(md5A)",
               "patchUrl": "home-1-2.delta", "patchMD5": "\(md5B)", "mode": 2, "isActive": true},
              {"moduleId": "fresh", "moduleVer": "1", "packageUrl": "fresh-1.zip", "packageMD5": "\(md5A)",
               "patchUrl": "fresh.delta", "patchMD5": "\(md5B)", "mode": 2, "isActive": true},
              {"moduleId": "broken", "moduleVer": "3", "packageUrl": "b-3.zip", "packageMD5": "\(md5A)",
               "patchUrl": "b.delta", "patchMD5": "not an md5", "mode": 2, "isActive": true},
              {"moduleId": "off", "packageUrl": "off.zip", "packageMD5": "\(md5A)",
               "patchUrl": "x", "patchMD5": "zz", "mode": 2, "isActive": false}
            ]}
            """
        let installed = [
            OfflinePackageManifestSource.InstalledModule(moduleId: "home", moduleVer: "1", isActive: true),
            OfflinePackageManifestSource.InstalledModule(moduleId: "broken", moduleVer: "2", isActive: true),
        ]
        let check = try OfflinePackageManifestSource.parseAnswer(
            Data(json.utf8),
            relativeTo: checkURL,
            installed: installed
        )
        #expect(check.refused.isEmpty)
        #expect(check.manifest.packages.map(\.id) == ["home", "fresh", "broken"])
        let home = try #require(check.manifest.packages.first)
        #expect(home.deltas.map(\.baseVersion) == ["1"])
        #expect(home.deltas.first?.md5?.hex == md5B)
        #expect(home.deltas.first?.url.absoluteString == "https://h5.test/offline/home-1-2.delta")
        #expect(check.manifest.packages[1].deltas.isEmpty, "nothing installed to patch")
        #expect(check.manifest.packages[2].deltas.isEmpty)
        #expect(check.modules[2].patchError?.code == .manifestInvalid)
        #expect(check.inactiveModuleIDs == ["off"])
    }

    @Test("an HTTP error from the check server fails the check with httpStatus")
    func httpError() async throws {
        let transport = FakeTransport()
        await transport.serve(Data("oops".utf8), at: checkURL, status: 500)
        let error = await #expect(throws: HotUpdateError.self) { try await source(transport).check() }
        #expect(error?.code == .httpStatus)
    }
}
