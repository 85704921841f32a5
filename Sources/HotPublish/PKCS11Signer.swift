import Foundation
import HotCore
import HotManifest
import HotVerify
import Synchronization

#if PKCS11 && canImport(CHotP11Kit)
import CHotP11Kit
#endif

/// Signs with a private key kept in a PKCS#11 token (a hardware security module, a smart card,
/// SoftHSM2), named by an RFC 7512 URI: the key never leaves the token, each signature is made
/// inside it.
///
/// The URI names everything: the module (`module-path`), the token (`token`, `manufacturer`, `serial`, `model`), the key (`object`,
/// `id`) and its PIN (`pin-value`, or `pin-source` as a `file:` URI of a file holding it):
///
/// ```swift
/// let signer = try PKCS11Signer(
///     uri: "pkcs11:token=release;object=release-ed25519"
///         + "?module-path=/usr/lib/softhsm/libsofthsm2.so&pin-source=file:/run/secrets/pin"
/// )
/// let envelope = try SignedEnvelope.sign(body, with: [signer], verifier: CryptoVerifier())
/// ```
///
/// Ed25519 keys sign with `CKM_EDDSA`; RSA keys with `CKM_SHA256_RSA_PKCS_PSS` (salt of 32
/// bytes, as `PublicKey.Scheme.rsaPSSSHA256` verifies) or, for
/// `PublicKey.Scheme.rsaPKCS1SHA256`, `CKM_SHA256_RSA_PKCS`. The signer opens one session
/// and logs in when it is made, so a wrong PIN, a missing token or key, or a key of another
/// type is an error before anything is signed; it logs out when it is released. Signatures
/// are made one at a time.
///
/// Needs the `PKCS11` trait (p11-kit; not on Apple platforms): without it every initializer
/// throws `HotUpdateError.Code.unsupported`.
public final class PKCS11Signer: Signer, @unchecked Sendable {
    /// The public half of the token's key, read from the token, with its scheme.
    public let publicKey: PublicKey
    /// The URI the signer was made from, with any `pin-value` left out.
    public let uri: String

    #if PKCS11 && canImport(CHotP11Kit)
    private let session: Session
    #endif

    /// Opens the token `uri` names, logs in and finds the private key.
    ///
    /// - Parameters:
    ///   - uri: An RFC 7512 `pkcs11:` URI naming one private key.
    ///   - rsaScheme: The scheme for an RSA key: `PublicKey.Scheme.rsaPSSSHA256` (default)
    ///     or `PublicKey.Scheme.rsaPKCS1SHA256`. Ignored for Ed25519.
    /// - Throws: `HotUpdateError.Code.invalidArgument` for a URI that cannot be parsed, a
    ///   module that is not a PKCS#11 module, or a PIN source other than a file;
    ///   `HotUpdateError.Code.notFound` when no token or no private key matches (or the PIN
    ///   file is missing); `HotUpdateError.Code.authenticationFailed` for a wrong or locked
    ///   PIN; `HotUpdateError.Code.unsupported` for a key that is neither Ed25519 nor RSA, or
    ///   a build without the `PKCS11` trait.
    public init(uri: String, rsaScheme: PublicKey.Scheme = .rsaPSSSHA256) throws {
        self.uri = Self.redactingPIN(uri)
        #if PKCS11 && canImport(CHotP11Kit)
        session = try Session(uri: uri, shownURI: self.uri, rsaScheme: rsaScheme)
        publicKey = session.publicKey
        #else
        throw HotUpdateError(
            .unsupported,
            "this build has no PKCS#11 support (the PKCS11 trait, with p11-kit): cannot sign with \(self.uri)"
        )
        #endif
    }

    /// Signs exactly `message` inside the token.
    ///
    /// - Throws: `HotUpdateError.Code.signatureInvalid` when the token refuses to sign.
    public func sign(_ message: Data) throws -> Data {
        #if PKCS11 && canImport(CHotP11Kit)
        return try session.sign(message)
        #else
        throw HotUpdateError(.unsupported, "this build has no PKCS#11 support")
        #endif
    }

    /// Whether `reference` names a key in a token (`pkcs11:…`) rather than a file.
    public static func isURI(_ reference: String) -> Bool {
        reference.lowercased().hasPrefix("pkcs11:")
    }

    /// `uri` with the value of a `pin-value` attribute replaced, for messages.
    static func redactingPIN(_ uri: String) -> String {
        guard let question = uri.firstIndex(of: "?") else { return uri }
        let query = uri[uri.index(after: question)...].split(separator: "&", omittingEmptySubsequences: false).map {
            $0.lowercased().hasPrefix("pin-value=") ? "pin-value=…" : String($0)
        }
        return String(uri[...question]) + query.joined(separator: "&")
    }
}

#if PKCS11 && canImport(CHotP11Kit)
extension PKCS11Signer {
    /// A logged-in session on the token, with its private key; the module is finalized and
    /// released when the session goes.
    fileprivate final class Session {
        let publicKey: PublicKey
        private let module: UnsafeMutablePointer<CK_FUNCTION_LIST>
        private let handle: CK_SESSION_HANDLE
        private let key: CK_OBJECT_HANDLE
        private let mechanism: CK_MECHANISM_TYPE
        private let lock = NSLock()
        private let shownURI: String

        init(uri text: String, shownURI: String, rsaScheme: PublicKey.Scheme) throws {
            self.shownURI = shownURI
            guard let uri = p11_kit_uri_new() else {
                throw HotUpdateError(.internalInconsistency, "p11-kit could not allocate a URI")
            }
            defer { p11_kit_uri_free(uri) }
            let parsed = p11_kit_uri_parse(text, P11_KIT_URI_FOR_ANY, uri)
            guard parsed == P11_KIT_URI_OK.rawValue else {
                let reason = p11_kit_uri_message(parsed).map { String(cString: $0) } ?? "code \(parsed)"
                throw HotUpdateError(.invalidArgument, "not a PKCS#11 URI (RFC 7512): \(reason)", subject: shownURI)
            }
            let pin = try Self.pin(of: uri, shownURI: shownURI)

            // The module: the one the URI names, or the first of p11-kit's registered modules
            // that has the token.
            guard let path = p11_kit_uri_get_module_path(uri).map({ String(cString: $0) }) else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the URI names no module: add module-path=/path/to/module.so to its query",
                    subject: shownURI
                )
            }
            // Managed by p11-kit: several signers of one module in a process (two keys of one
            // token) each initialize and finalize it without disturbing the others.
            guard let module = p11_kit_module_load(path, 0) else {
                let reason = p11_kit_message().map { String(cString: $0) } ?? "it cannot be loaded"
                throw HotUpdateError(.invalidArgument, "\(path) is not a PKCS#11 module: \(reason)", subject: shownURI)
            }
            var moduleReady = false
            defer { if !moduleReady { p11_kit_module_release(module) } }
            try Self.check(p11_kit_module_initialize(module), "initializing the module \(path)", shownURI)
            var initialized = true
            defer { if !moduleReady && initialized { _ = p11_kit_module_finalize(module) } }
            let functions = module.pointee

            // The token.
            let (slot, tokenName) = try Self.slot(matching: uri, in: functions, shownURI: shownURI)
            let loginKey = path + "\u{0}" + tokenName
            var session: CK_SESSION_HANDLE = 0
            try Self.check(
                try Self.call(functions.C_OpenSession, "C_OpenSession")(
                    slot,
                    CK_FLAGS(CKF_SERIAL_SESSION),
                    nil,
                    nil,
                    &session
                ),
                "opening a session",
                shownURI
            )
            var sessionOpen = true
            defer { if !moduleReady && sessionOpen { _ = functions.C_CloseSession?(session) } }
            var pinBytes = Array(pin.utf8)
            let login = try Self.call(functions.C_Login, "C_Login")(
                session,
                CK_USER_TYPE(CKU_USER),
                &pinBytes,
                CK_ULONG(pinBytes.count)
            )
            switch login {
            case CK_RV(CKR_OK):
                Self.loggedIn.withLock { $0[loginKey] = Self.fingerprint(pinBytes) }
            case CK_RV(CKR_USER_ALREADY_LOGGED_IN):
                // Another signer of this process logged the token in (PKCS#11 logs in an
                // application, not a session), so the token did not check this PIN: a token
                // has one user PIN, and this one must be the one that logged in.
                let known = Self.loggedIn.withLock { $0[loginKey] }
                if let known, known != Self.fingerprint(pinBytes) {
                    throw HotUpdateError(.authenticationFailed, "the token refused the PIN", subject: shownURI)
                }
            case CK_RV(CKR_PIN_INCORRECT), CK_RV(CKR_PIN_LEN_RANGE):
                throw HotUpdateError(.authenticationFailed, "the token refused the PIN", subject: shownURI)
            case CK_RV(CKR_PIN_LOCKED):
                throw HotUpdateError(.authenticationFailed, "the token's PIN is locked", subject: shownURI)
            default:
                try Self.check(login, "logging in", shownURI)
            }

            // The private key: the URI's attributes, of class private key.
            let key = try Self.privateKey(matching: uri, session: session, functions: functions, shownURI: shownURI)
            let keyType: CK_KEY_TYPE = try Self.integer(CK_ATTRIBUTE_TYPE(CKA_KEY_TYPE), of: key, session, functions)
            let id = try Self.attribute(CK_ATTRIBUTE_TYPE(CKA_ID), of: key, session, functions)
            switch keyType {
            case CK_KEY_TYPE(CKK_EC_EDWARDS):
                let point = try Self.edwardsPoint(id: id, session: session, functions: functions, shownURI: shownURI)
                publicKey = PublicKey(
                    scheme: .ed25519,
                    pem: PEM.encode(SubjectPublicKeyInfo.ed25519DER(point), label: "PUBLIC KEY")
                )
                mechanism = CK_MECHANISM_TYPE(CKM_EDDSA)
            case CK_KEY_TYPE(CKK_RSA):
                guard rsaScheme == .rsaPSSSHA256 || rsaScheme == .rsaPKCS1SHA256 else {
                    throw HotUpdateError(
                        .invalidArgument,
                        "an RSA key in a token signs with rsa-pss-sha256 or rsa-pkcs1-sha256, not \(rsaScheme)",
                        subject: shownURI
                    )
                }
                let modulus = try Self.attribute(CK_ATTRIBUTE_TYPE(CKA_MODULUS), of: key, session, functions)
                let exponent = try Self.attribute(CK_ATTRIBUTE_TYPE(CKA_PUBLIC_EXPONENT), of: key, session, functions)
                publicKey = PublicKey(
                    scheme: rsaScheme,
                    pem: PEM.encode(
                        SubjectPublicKeyInfo.rsaDER(modulus: modulus, exponent: exponent),
                        label: "PUBLIC KEY"
                    )
                )
                mechanism = CK_MECHANISM_TYPE(
                    rsaScheme == .rsaPKCS1SHA256 ? CKM_SHA256_RSA_PKCS : CKM_SHA256_RSA_PKCS_PSS
                )
            default:
                throw HotUpdateError(
                    .unsupported,
                    "the key is of PKCS#11 key type 0x\(String(keyType, radix: 16)): release keys are Ed25519 or RSA",
                    subject: shownURI
                )
            }
            self.module = module
            self.handle = session
            self.key = key
            moduleReady = true
            sessionOpen = false
            initialized = false
        }

        deinit {
            let functions = module.pointee
            // No C_Logout: it would log out every other session of the process on the token;
            // closing the last one logs the token out.
            _ = functions.C_CloseSession?(handle)
            _ = p11_kit_module_finalize(module)
            p11_kit_module_release(module)
        }

        func sign(_ message: Data) throws -> Data {
            lock.lock()
            defer { lock.unlock() }
            let functions = module.pointee
            var pss = CK_RSA_PKCS_PSS_PARAMS(
                hashAlg: CK_MECHANISM_TYPE(CKM_SHA256),
                mgf: CK_RSA_PKCS_MGF_TYPE(CKG_MGF1_SHA256),
                sLen: 32
            )
            var bytes = [UInt8](message)
            var length: CK_ULONG = 0
            let started: CK_RV = try withUnsafeMutablePointer(to: &pss) { parameters in
                var chosen = CK_MECHANISM(mechanism: mechanism, pParameter: nil, ulParameterLen: 0)
                if mechanism == CK_MECHANISM_TYPE(CKM_SHA256_RSA_PKCS_PSS) {
                    chosen.pParameter = UnsafeMutableRawPointer(parameters)
                    chosen.ulParameterLen = CK_ULONG(MemoryLayout<CK_RSA_PKCS_PSS_PARAMS>.size)
                }
                return try Self.call(functions.C_SignInit, "C_SignInit")(handle, &chosen, key)
            }
            try Self.check(started, "starting a signature", shownURI, as: .signatureInvalid)
            // The length first, then the signature (C_Sign's two calls).
            try Self.check(
                try Self.call(functions.C_Sign, "C_Sign")(handle, &bytes, CK_ULONG(bytes.count), nil, &length),
                "signing",
                shownURI,
                as: .signatureInvalid
            )
            var signature = [UInt8](repeating: 0, count: Int(length))
            try Self.check(
                try Self.call(functions.C_Sign, "C_Sign")(handle, &bytes, CK_ULONG(bytes.count), &signature, &length),
                "signing",
                shownURI,
                as: .signatureInvalid
            )
            return Data(signature.prefix(Int(length)))
        }

        /// The tokens this process logged in, by module path and token label and serial: a
        /// digest of the PIN that did it.
        private static let loggedIn = Mutex<[String: Data]>([:])

        /// A digest of `pin`, so that no PIN is kept (the PIN itself in a build with no digest).
        private static func fingerprint(_ pin: [UInt8]) -> Data {
            (try? CryptoVerifier().digest(of: Data(pin), using: .sha256)).map { Data($0.bytes) } ?? Data(pin)
        }

        /// The PIN from `pin-value`, or the first line of the file `pin-source` names.
        private static func pin(of uri: OpaquePointer, shownURI: String) throws -> String {
            if let value = p11_kit_uri_get_pin_value(uri) { return String(cString: value) }
            guard let source = p11_kit_uri_get_pin_source(uri).map({ String(cString: $0) }) else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the URI gives no PIN: add pin-source=file:/path/to/pin (or pin-value=…) to its query",
                    subject: shownURI
                )
            }
            let path: String
            if source.hasPrefix("file://") {
                path = URL(string: source)?.path ?? String(source.dropFirst(7))
            } else if source.hasPrefix("file:") {
                path = String(source.dropFirst(5))
            } else if !source.contains(":") {
                path = source
            } else {
                throw HotUpdateError(
                    .invalidArgument,
                    "pin-source \(source) is not a file: give file:/path/to/pin",
                    subject: shownURI
                )
            }
            let text: String
            do {
                text = try String(contentsOfFile: path, encoding: .utf8)
            } catch {
                throw HotUpdateError.wrap(error, as: .notFound, "cannot read the PIN file \(path)")
            }
            return String(text.split(separator: "\n", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
                .trimmingCharacters(in: CharacterSet(charactersIn: "\r"))
        }

        /// The first slot whose token the URI's token attributes match.
        private static func slot(
            matching uri: OpaquePointer,
            in functions: CK_FUNCTION_LIST,
            shownURI: String
        ) throws -> (CK_SLOT_ID, String) {
            var count: CK_ULONG = 0
            try check(
                try call(functions.C_GetSlotList, "C_GetSlotList")(CK_BBOOL(CK_TRUE), nil, &count),
                "listing the slots",
                shownURI
            )
            var slots = [CK_SLOT_ID](repeating: 0, count: Int(count))
            if count > 0 {
                try check(
                    try call(functions.C_GetSlotList, "C_GetSlotList")(CK_BBOOL(CK_TRUE), &slots, &count),
                    "listing the slots",
                    shownURI
                )
            }
            var labels: [String] = []
            for slot in slots.prefix(Int(count)) {
                var info = CK_TOKEN_INFO()
                guard try call(functions.C_GetTokenInfo, "C_GetTokenInfo")(slot, &info) == CK_RV(CKR_OK) else {
                    continue
                }
                let label = withUnsafeBytes(of: info.label) { String(decoding: $0, as: UTF8.self) }
                if p11_kit_uri_match_token_info(uri, &info) == 1 {
                    let serial = withUnsafeBytes(of: info.serialNumber) { String(decoding: $0, as: UTF8.self) }
                    return (slot, label + "\u{0}" + serial)
                }
                labels.append(label.trimmingCharacters(in: .whitespaces))
            }
            throw HotUpdateError(
                .notFound,
                "no token matches the URI; the module has "
                    + (labels.isEmpty ? "no token" : "the tokens \(labels.map { "'\($0)'" }.joined(separator: ", "))"),
                subject: shownURI
            )
        }

        /// The one private key the URI's object attributes match.
        private static func privateKey(
            matching uri: OpaquePointer,
            session: CK_SESSION_HANDLE,
            functions: CK_FUNCTION_LIST,
            shownURI: String
        ) throws -> CK_OBJECT_HANDLE {
            var count: CK_ULONG = 0
            let given = p11_kit_uri_get_attributes(uri, &count)
            var template: [CK_ATTRIBUTE] = []
            var named = false
            for index in 0..<Int(count) {
                guard let attribute = given?[index] else { continue }
                if attribute.type == CK_ATTRIBUTE_TYPE(CKA_CLASS) {
                    let wanted = attribute.pValue?.loadUnaligned(as: CK_OBJECT_CLASS.self)
                    guard wanted == CK_OBJECT_CLASS(CKO_PRIVATE_KEY) else {
                        throw HotUpdateError(
                            .invalidArgument,
                            "the URI names an object that is not a private key (type=private to sign)",
                            subject: shownURI
                        )
                    }
                    continue
                }
                if attribute.type == CK_ATTRIBUTE_TYPE(CKA_LABEL) || attribute.type == CK_ATTRIBUTE_TYPE(CKA_ID) {
                    named = true
                }
                template.append(attribute)
            }
            guard named else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the URI names no key: give object=<label> or id=<id> in its path",
                    subject: shownURI
                )
            }
            var privateClass = CK_OBJECT_CLASS(CKO_PRIVATE_KEY)
            let found = try withUnsafeMutableBytes(of: &privateClass) { classBytes in
                template.append(
                    CK_ATTRIBUTE(
                        type: CK_ATTRIBUTE_TYPE(CKA_CLASS),
                        pValue: classBytes.baseAddress,
                        ulValueLen: CK_ULONG(classBytes.count)
                    )
                )
                return try findObjects(&template, atMost: 2, session: session, functions: functions, shownURI: shownURI)
            }
            let foundCount = found.count
            guard foundCount > 0 else {
                throw HotUpdateError(.notFound, "the token has no private key the URI names", subject: shownURI)
            }
            guard foundCount == 1 else {
                throw HotUpdateError(
                    .invalidArgument,
                    "the URI names more than one private key: add id= or a longer object=",
                    subject: shownURI
                )
            }
            return found[0]
        }

        /// The objects `template` matches, at most `limit` of them.
        private static func findObjects(
            _ template: inout [CK_ATTRIBUTE],
            atMost limit: Int,
            session: CK_SESSION_HANDLE,
            functions: CK_FUNCTION_LIST,
            shownURI: String
        ) throws -> [CK_OBJECT_HANDLE] {
            try check(
                try call(functions.C_FindObjectsInit, "C_FindObjectsInit")(
                    session,
                    &template,
                    CK_ULONG(template.count)
                ),
                "searching the token",
                shownURI
            )
            var found = [CK_OBJECT_HANDLE](repeating: 0, count: limit)
            var count: CK_ULONG = 0
            let searched = try call(functions.C_FindObjects, "C_FindObjects")(session, &found, CK_ULONG(limit), &count)
            _ = functions.C_FindObjectsFinal?(session)
            try check(searched, "searching the token", shownURI)
            return Array(found.prefix(Int(count)))
        }

        /// The Ed25519 public key (32 bytes) of the public key object with `id`.
        private static func edwardsPoint(
            id: [UInt8],
            session: CK_SESSION_HANDLE,
            functions: CK_FUNCTION_LIST,
            shownURI: String
        ) throws -> [UInt8] {
            var publicClass = CK_OBJECT_CLASS(CKO_PUBLIC_KEY)
            var keyID = id
            let objects = try withUnsafeMutableBytes(of: &publicClass) { classBytes in
                try keyID.withUnsafeMutableBytes { idBytes in
                    var template = [
                        CK_ATTRIBUTE(
                            type: CK_ATTRIBUTE_TYPE(CKA_CLASS),
                            pValue: classBytes.baseAddress,
                            ulValueLen: CK_ULONG(classBytes.count)
                        ),
                        CK_ATTRIBUTE(
                            type: CK_ATTRIBUTE_TYPE(CKA_ID),
                            pValue: idBytes.baseAddress,
                            ulValueLen: CK_ULONG(idBytes.count)
                        ),
                    ]
                    return try findObjects(
                        &template,
                        atMost: 1,
                        session: session,
                        functions: functions,
                        shownURI: shownURI
                    )
                }
            }
            let count = objects.count
            guard count == 1 else {
                throw HotUpdateError(
                    .notFound,
                    "the token has no public key object beside the Ed25519 private key (same id)",
                    subject: shownURI
                )
            }
            let point = try attribute(CK_ATTRIBUTE_TYPE(CKA_EC_POINT), of: objects[0], session, functions)
            // CKA_EC_POINT holds the 32 bytes in a DER OCTET STRING; some tokens give them bare.
            if point.count == 34, point[0] == 0x04, point[1] == 0x20 { return Array(point[2...]) }
            guard point.count == 32 else {
                throw HotUpdateError(
                    .unsupported,
                    "the key's CKA_EC_POINT (\(point.count) bytes) is not an Ed25519 public key",
                    subject: shownURI
                )
            }
            return point
        }

        /// The bytes of attribute `type` of `object`.
        private static func attribute(
            _ type: CK_ATTRIBUTE_TYPE,
            of object: CK_OBJECT_HANDLE,
            _ session: CK_SESSION_HANDLE,
            _ functions: CK_FUNCTION_LIST
        ) throws -> [UInt8] {
            var query = CK_ATTRIBUTE(type: type, pValue: nil, ulValueLen: 0)
            try check(
                try call(functions.C_GetAttributeValue, "C_GetAttributeValue")(session, object, &query, 1),
                "reading the key",
                ""
            )
            var value = [UInt8](repeating: 0, count: Int(query.ulValueLen))
            try value.withUnsafeMutableBytes { buffer in
                query.pValue = buffer.baseAddress
                try check(
                    try call(functions.C_GetAttributeValue, "C_GetAttributeValue")(session, object, &query, 1),
                    "reading the key",
                    ""
                )
            }
            return Array(value.prefix(Int(query.ulValueLen)))
        }

        /// Attribute `type` of `object` as a `CK_ULONG`.
        private static func integer(
            _ type: CK_ATTRIBUTE_TYPE,
            of object: CK_OBJECT_HANDLE,
            _ session: CK_SESSION_HANDLE,
            _ functions: CK_FUNCTION_LIST
        ) throws -> CK_ULONG {
            let bytes = try attribute(type, of: object, session, functions)
            guard bytes.count == MemoryLayout<CK_ULONG>.size else {
                throw HotUpdateError(.unsupported, "the token's key attribute has \(bytes.count) bytes")
            }
            return bytes.withUnsafeBytes { $0.loadUnaligned(as: CK_ULONG.self) }
        }

        /// The module's function `name`, which a module may leave out.
        private static func call<Function>(_ function: Function?, _ name: String) throws -> Function {
            guard let function else {
                throw HotUpdateError(.unsupported, "the PKCS#11 module has no \(name)")
            }
            return function
        }

        /// Throws unless `result` is `CKR_OK`.
        private static func check(
            _ result: CK_RV,
            _ doing: String,
            _ shownURI: String,
            as code: HotUpdateError.Code = .invalidArgument
        ) throws {
            guard result != CK_RV(CKR_OK) else { return }
            throw HotUpdateError(
                result == CK_RV(CKR_TOKEN_NOT_PRESENT) ? .notFound : code,
                "the PKCS#11 module failed \(doing): CKR 0x\(String(result, radix: 16))",
                subject: shownURI.isEmpty ? nil : shownURI
            )
        }
    }
}
#endif
