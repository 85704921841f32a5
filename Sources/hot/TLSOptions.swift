import ArgumentParser
import Foundation
import HotCore
import HotTransport

/// Options of the commands that fetch or upload over HTTPS: whom TLS trusts.
struct TLSOptions: ParsableArguments {
    @Option(
        name: .customLong("ca-file"),
        help: ArgumentHelp(
            "A PEM file of CA certificates to trust instead of the system's (a private CA).",
            valueName: "pem"
        )
    )
    var caFile: String?

    @Flag(help: "With --ca-file: trust the system's CAs as well as the file's.")
    var caFileAndSystem = false

    @Option(
        name: .customLong("pin"),
        help: ArgumentHelp(
            "Accept only servers whose certificate key has this SHA-256 (sha256//BASE64 of its SubjectPublicKeyInfo, as curl's --pinnedpubkey); repeatable: pin the next key before rotating to it.",
            valueName: "sha256//base64"
        )
    )
    var pin: [String] = []

    func validate() throws {
        if caFileAndSystem, caFile == nil { throw ValidationError("--ca-file-and-system needs --ca-file") }
        do {
            _ = try trust()
        } catch let error as HotUpdateError {
            throw ValidationError(error.description)
        }
    }

    /// The trust these options describe.
    func trust() throws -> TLSTrust {
        let authorities: TLSTrust.Authorities =
            caFile.map { path in
                let absolute = URL(fileURLWithPath: path).standardizedFileURL.path
                return caFileAndSystem ? .systemAnd(bundle: absolute) : .only(bundle: absolute)
            } ?? .system
        return try TLSTrust(authorities: authorities, pins: pin)
    }
}
