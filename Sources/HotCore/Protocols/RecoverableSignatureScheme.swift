extension SignatureScheme {
    /// RSA PKCS#1 v1.5 signature padding (block type 1) over the message itself: no hash, no
    /// DigestInfo. The signer "encrypts the message with the private key" — what OpenSSL's
    /// `RSA_private_encrypt`, PHP's `openssl_private_encrypt` and `openssl pkeyutl -sign`
    /// without `-digest` produce — and the verifier recovers the message with the public key
    /// and compares it with the bytes it expects.
    ///
    /// This is the scheme of the older patch servers that sign a patch's MD5 string (see
    /// `SignedPatchListManifestSource`). The message must be at most the modulus length
    /// minus 11 bytes. Prefer ``ed25519`` or ``rsaPSSSHA256`` for anything new: this scheme
    /// signs whatever short string it is given, with no hash and no context.
    ///
    /// ```swift
    /// let key = PublicKey(scheme: .rsaPKCS1Raw, pem: patchServerPEM)
    /// let valid = try verifier.verify(signature: signature, of: Data(md5.hex.utf8), with: key)
    /// ```
    public static let rsaPKCS1Raw = SignatureScheme(rawValue: "rsa-pkcs1-raw")
}
