/// What risc offers in TLS, as a server (the public and admin listeners) and as a client (its
/// PostgreSQL store; over libcurl the issuer's key set, the RISC and SSF APIs, the webhook, the
/// notice endpoint): TLS 1.2 or newer, and in TLS 1.2 ECDHE key exchange (forward secrecy) with an
/// AEAD cipher only. RFC 8935 §5.3 has RFC 7525 apply, and RFC 9325 (which replaces it) says not
/// to negotiate RSA key transport nor CBC suites; NIOSSL's default list has both. TLS 1.3's suites
/// all qualify.
public enum TLSPolicy {
    /// The TLS 1.2 suites, in OpenSSL/BoringSSL cipher-string form.
    public static let tls12CipherSuites = "ECDH+AESGCM:ECDH+CHACHA20:!aNULL:!eNULL"
}
