// SHA-2 through libcrypto's low-level interface, which hashes on the caller's stack: every
// EVP_DigestInit_ex of OpenSSL 3.0 allocates the provider's context anew (the event log hashes
// every line it writes, the verifier every SET's signing input). Deprecated in 3.0, still part
// of libcrypto's API and ABI.
#define OPENSSL_SUPPRESS_DEPRECATED
#include <openssl/sha.h>
#include "risc_openssl.h"

void risc_ossl_sha256(const uint8_t *prefix, size_t prefix_len, const void *data, size_t len, uint8_t *out) {
    SHA256_CTX context;
    SHA256_Init(&context);
    if (prefix_len > 0) SHA256_Update(&context, prefix, prefix_len);
    if (len > 0) SHA256_Update(&context, data, len);
    SHA256_Final(out, &context);
    OPENSSL_cleanse(&context, sizeof context);
}

// SHA-384 and SHA-512 share their context and update; they start and end apart.
static int sha512_family(int (*init)(SHA512_CTX *), int (*final)(unsigned char *, SHA512_CTX *), const void *data, size_t len,
                         uint8_t *out, int size) {
    SHA512_CTX context;
    init(&context);
    SHA512_Update(&context, data, len);
    final(out, &context);
    OPENSSL_cleanse(&context, sizeof context);
    return size;
}

int risc_ossl_sha2(int bits, const void *data, size_t len, uint8_t *out) {
    switch (bits) {
    case 256: risc_ossl_sha256(NULL, 0, data, len, out); return 32;
    case 384: return sha512_family(SHA384_Init, SHA384_Final, data, len, out, 48);
    case 512: return sha512_family(SHA512_Init, SHA512_Final, data, len, out, 64);
    default: return 0;
    }
}
