// Small C helpers around OpenSSL 3's libcrypto for risc.
//
// Swift calls most of libcrypto directly. These helpers exist where it cannot: macros
// (EVP_PKEY_PUBLIC_KEY), variadic functions (EVP_PKEY_Q_keygen), pointer-to-pointer DER
// encoders, and OSSL_PARAM_BLD pushes, which keep the pointers they are given (Swift
// temporaries would dangle before OSSL_PARAM_BLD_to_param reads them).
#ifndef RISC_OPENSSL_H
#define RISC_OPENSSL_H

#include <stddef.h>
#include <stdint.h>
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/core_names.h>
#include <openssl/rsa.h>

/// SHA-256 of `prefix` then `data` into `out` (32 bytes), with no allocation (risc_sha256.c).
void risc_ossl_sha256(const uint8_t *prefix, size_t prefix_len, const void *data, size_t len, uint8_t *out);
/// SHA-256, SHA-384 or SHA-512 (`bits`) of `data` into `out` (room for 64 bytes); returns the
/// digest's length, 0 for another `bits`.
int risc_ossl_sha2(int bits, const void *data, size_t len, uint8_t *out);

/// RSA public key from big-endian modulus and exponent. NULL on failure.
EVP_PKEY *risc_ossl_rsa_public(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len);

/// RSA private key from its JWK members (all big-endian). p..qi may be NULL (len 0) to import n, e, d only.
EVP_PKEY *risc_ossl_rsa_private(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len,
                                const uint8_t *d, size_t d_len, const uint8_t *p, size_t p_len,
                                const uint8_t *q, size_t q_len, const uint8_t *dp, size_t dp_len,
                                const uint8_t *dq, size_t dq_len, const uint8_t *qi, size_t qi_len);

/// EC public key on the named group ("P-256", "P-384", "P-521") from affine coordinates.
/// The point is checked to lie on the curve. NULL on failure.
EVP_PKEY *risc_ossl_ec_public(const char *group, const uint8_t *x, size_t x_len, const uint8_t *y, size_t y_len);

/// EC private key (scalar d plus public coordinates).
EVP_PKEY *risc_ossl_ec_private(const char *group, const uint8_t *x, size_t x_len, const uint8_t *y, size_t y_len,
                               const uint8_t *d, size_t d_len);

/// Generate a key: kind 1 = RSA (bits), 2 = EC (group name), 3 = Ed25519.
EVP_PKEY *risc_ossl_generate(int kind, unsigned int bits, const char *group);

/// ECDSA: JOSE raw r||s (2*coord_len bytes) → DER. Returns DER length, or -1. *out must be freed with OPENSSL_free.
int risc_ossl_ecdsa_raw_to_der(const uint8_t *raw, size_t raw_len, uint8_t **out);
/// ECDSA: DER → JOSE raw r||s, each left-padded to coord_len. Returns 1 on success.
int risc_ossl_ecdsa_der_to_raw(const uint8_t *der, size_t der_len, size_t coord_len, uint8_t *out);

/// Write a private key as PKCS#8 PEM into a malloc'd buffer. Returns length or -1. Free with OPENSSL_free.
long risc_ossl_private_pem(EVP_PKEY *key, char **out);
/// Read a private key from PEM bytes. NULL on failure.
EVP_PKEY *risc_ossl_read_private_pem(const uint8_t *pem, size_t len);

/// Copy a BIGNUM parameter (e.g. "n", "e") as big-endian bytes into out (capacity cap). Returns length or -1.
int risc_ossl_get_bn(const EVP_PKEY *key, const char *name, uint8_t *out, size_t cap);
/// Copy an octet-string parameter (e.g. "pub" for EC, the encoded point). Returns length or -1.
int risc_ossl_get_octets(const EVP_PKEY *key, const char *name, uint8_t *out, size_t cap);
/// The group name of an EC key into out. Returns 1 on success.
int risc_ossl_get_group(const EVP_PKEY *key, char *out, size_t cap);

/// Most recent OpenSSL error as text into buf, and clear the error queue.
void risc_ossl_last_error(char *buf, size_t cap);

/// Key type tests that are macros or need names in OpenSSL 3.
int risc_ossl_is_rsa(const EVP_PKEY *key);
int risc_ossl_is_ec(const EVP_PKEY *key);
int risc_ossl_is_ed25519(const EVP_PKEY *key);

#endif
