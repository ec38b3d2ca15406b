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

int risc_ossl_sha2(int bits, const void *data, size_t len, uint8_t *out) {
    switch (bits) {
    case 256: risc_ossl_sha256(NULL, 0, data, len, out); return 32;
    case 384: {
        SHA512_CTX context;
        SHA384_Init(&context);
        SHA384_Update(&context, data, len);
        SHA384_Final(out, &context);
        OPENSSL_cleanse(&context, sizeof context);
        return 48;
    }
    case 512: {
        SHA512_CTX context;
        SHA512_Init(&context);
        SHA512_Update(&context, data, len);
        SHA512_Final(out, &context);
        OPENSSL_cleanse(&context, sizeof context);
        return 64;
    }
    default: return 0;
    }
}
