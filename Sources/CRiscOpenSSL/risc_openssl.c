#include "risc_openssl.h"
#include <string.h>
#include <openssl/param_build.h>
#include <openssl/ec.h>
#include <openssl/bn.h>

static int push_bn(OSSL_PARAM_BLD *bld, const char *key, const uint8_t *bytes, size_t len, BIGNUM **keep) {
    BIGNUM *bn = BN_bin2bn(bytes, (int)len, NULL);
    if (bn == NULL) return 0;
    *keep = bn;  // OSSL_PARAM_BLD keeps the pointer: free only after the params are built
    return OSSL_PARAM_BLD_push_BN(bld, key, bn);
}

static EVP_PKEY *from_params(const char *type, OSSL_PARAM_BLD *bld, int selection) {
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM *params = OSSL_PARAM_BLD_to_param(bld);
    if (params == NULL) return NULL;
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_from_name(NULL, type, NULL);
    if (ctx != NULL && EVP_PKEY_fromdata_init(ctx) > 0) {
        if (EVP_PKEY_fromdata(ctx, &pkey, selection, params) <= 0) pkey = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    OSSL_PARAM_free(params);
    return pkey;
}

EVP_PKEY *risc_ossl_rsa_public(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len) {
    return risc_ossl_rsa_private(n, n_len, e, e_len, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
}

EVP_PKEY *risc_ossl_rsa_private(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len,
                                const uint8_t *d, size_t d_len, const uint8_t *p, size_t p_len,
                                const uint8_t *q, size_t q_len, const uint8_t *dp, size_t dp_len,
                                const uint8_t *dq, size_t dq_len, const uint8_t *qi, size_t qi_len) {
    BIGNUM *keep[8] = {0};
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (bld == NULL) return NULL;
    int ok = push_bn(bld, OSSL_PKEY_PARAM_RSA_N, n, n_len, &keep[0])
          && push_bn(bld, OSSL_PKEY_PARAM_RSA_E, e, e_len, &keep[1]);
    int selection = EVP_PKEY_PUBLIC_KEY;
    if (ok && d_len > 0) {
        selection = EVP_PKEY_KEYPAIR;
        ok = push_bn(bld, OSSL_PKEY_PARAM_RSA_D, d, d_len, &keep[2]);
        if (ok && p_len > 0 && q_len > 0 && dp_len > 0 && dq_len > 0 && qi_len > 0) {
            ok = push_bn(bld, OSSL_PKEY_PARAM_RSA_FACTOR1, p, p_len, &keep[3])
              && push_bn(bld, OSSL_PKEY_PARAM_RSA_FACTOR2, q, q_len, &keep[4])
              && push_bn(bld, OSSL_PKEY_PARAM_RSA_EXPONENT1, dp, dp_len, &keep[5])
              && push_bn(bld, OSSL_PKEY_PARAM_RSA_EXPONENT2, dq, dq_len, &keep[6])
              && push_bn(bld, OSSL_PKEY_PARAM_RSA_COEFFICIENT1, qi, qi_len, &keep[7]);
        }
    }
    if (ok) pkey = from_params("RSA", bld, selection);
    OSSL_PARAM_BLD_free(bld);
    for (int i = 0; i < 8; i++) BN_free(keep[i]);
    return pkey;
}

static const char *group_name(const char *jwk_crv) {
    if (strcmp(jwk_crv, "P-256") == 0) return "prime256v1";
    if (strcmp(jwk_crv, "P-384") == 0) return "secp384r1";
    if (strcmp(jwk_crv, "P-521") == 0) return "secp521r1";
    return NULL;
}

static EVP_PKEY *ec_key(const char *crv, const uint8_t *x, size_t x_len, const uint8_t *y, size_t y_len,
                        const uint8_t *d, size_t d_len) {
    const char *group = group_name(crv);
    if (group == NULL || x_len == 0 || x_len != y_len || x_len > 66) return NULL;
    uint8_t point[1 + 2 * 66];
    point[0] = 0x04;  // uncompressed
    memcpy(point + 1, x, x_len);
    memcpy(point + 1 + x_len, y, y_len);
    BIGNUM *priv = NULL;
    EVP_PKEY *pkey = NULL;
    OSSL_PARAM_BLD *bld = OSSL_PARAM_BLD_new();
    if (bld == NULL) return NULL;
    int ok = OSSL_PARAM_BLD_push_utf8_string(bld, OSSL_PKEY_PARAM_GROUP_NAME, group, 0)
          && OSSL_PARAM_BLD_push_octet_string(bld, OSSL_PKEY_PARAM_PUB_KEY, point, 1 + x_len + y_len);
    if (ok && d_len > 0) ok = push_bn(bld, OSSL_PKEY_PARAM_PRIV_KEY, d, d_len, &priv);
    if (ok) pkey = from_params("EC", bld, d_len > 0 ? EVP_PKEY_KEYPAIR : EVP_PKEY_PUBLIC_KEY);
    OSSL_PARAM_BLD_free(bld);
    BN_free(priv);
    if (pkey != NULL) {
        // RFC 8725 §3.4: validate the point lies on the curve (invalid-curve attacks).
        EVP_PKEY_CTX *check = EVP_PKEY_CTX_new_from_pkey(NULL, pkey, NULL);
        int valid = check != NULL && EVP_PKEY_public_check(check) == 1;
        EVP_PKEY_CTX_free(check);
        if (!valid) { EVP_PKEY_free(pkey); pkey = NULL; }
    }
    return pkey;
}

EVP_PKEY *risc_ossl_ec_public(const char *crv, const uint8_t *x, size_t x_len, const uint8_t *y, size_t y_len) {
    return ec_key(crv, x, x_len, y, y_len, NULL, 0);
}

EVP_PKEY *risc_ossl_ec_private(const char *crv, const uint8_t *x, size_t x_len, const uint8_t *y, size_t y_len,
                               const uint8_t *d, size_t d_len) {
    if (d_len == 0) return NULL;
    return ec_key(crv, x, x_len, y, y_len, d, d_len);
}

EVP_PKEY *risc_ossl_generate(int kind, unsigned int bits, const char *crv) {
    switch (kind) {
    case 1: return EVP_PKEY_Q_keygen(NULL, NULL, "RSA", (size_t)bits);
    case 2: {
        const char *group = group_name(crv);
        return group == NULL ? NULL : EVP_PKEY_Q_keygen(NULL, NULL, "EC", group);
    }
    case 3: return EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    default: return NULL;
    }
}

int risc_ossl_ecdsa_raw_to_der(const uint8_t *raw, size_t raw_len, uint8_t **out) {
    if (raw_len == 0 || raw_len % 2 != 0) return -1;
    size_t half = raw_len / 2;
    BIGNUM *r = BN_bin2bn(raw, (int)half, NULL);
    BIGNUM *s = BN_bin2bn(raw + half, (int)half, NULL);
    ECDSA_SIG *sig = ECDSA_SIG_new();
    if (r == NULL || s == NULL || sig == NULL || ECDSA_SIG_set0(sig, r, s) != 1) {
        BN_free(r); BN_free(s); ECDSA_SIG_free(sig);
        return -1;
    }
    *out = NULL;
    int len = i2d_ECDSA_SIG(sig, out);
    ECDSA_SIG_free(sig);
    return len;
}

int risc_ossl_ecdsa_der_to_raw(const uint8_t *der, size_t der_len, size_t coord_len, uint8_t *out) {
    const unsigned char *p = der;
    ECDSA_SIG *sig = d2i_ECDSA_SIG(NULL, &p, (long)der_len);
    if (sig == NULL) return 0;
    const BIGNUM *r = ECDSA_SIG_get0_r(sig), *s = ECDSA_SIG_get0_s(sig);
    int ok = BN_bn2binpad(r, out, (int)coord_len) == (int)coord_len
          && BN_bn2binpad(s, out + coord_len, (int)coord_len) == (int)coord_len;
    ECDSA_SIG_free(sig);
    return ok;
}

long risc_ossl_private_pem(EVP_PKEY *key, char **out) {
    BIO *bio = BIO_new(BIO_s_mem());
    if (bio == NULL) return -1;
    long len = -1;
    if (PEM_write_bio_PrivateKey(bio, key, NULL, NULL, 0, NULL, NULL) == 1) {
        char *data = NULL;
        long n = BIO_get_mem_data(bio, &data);
        *out = OPENSSL_malloc((size_t)n);
        if (*out != NULL) { memcpy(*out, data, (size_t)n); len = n; }
    }
    BIO_free(bio);
    return len;
}

EVP_PKEY *risc_ossl_read_private_pem(const uint8_t *pem, size_t len) {
    BIO *bio = BIO_new_mem_buf(pem, (int)len);
    if (bio == NULL) return NULL;
    EVP_PKEY *key = PEM_read_bio_PrivateKey(bio, NULL, NULL, NULL);
    BIO_free(bio);
    return key;
}

int risc_ossl_get_bn(const EVP_PKEY *key, const char *name, uint8_t *out, size_t cap) {
    BIGNUM *bn = NULL;
    if (EVP_PKEY_get_bn_param(key, name, &bn) != 1) return -1;
    int n = BN_num_bytes(bn);
    int len = (size_t)n <= cap ? BN_bn2bin(bn, out) : -1;
    BN_free(bn);
    return len;
}

int risc_ossl_get_octets(const EVP_PKEY *key, const char *name, uint8_t *out, size_t cap) {
    size_t len = 0;
    if (EVP_PKEY_get_octet_string_param(key, name, out, cap, &len) != 1) return -1;
    return (int)len;
}

int risc_ossl_get_group(const EVP_PKEY *key, char *out, size_t cap) {
    size_t len = 0;
    return EVP_PKEY_get_utf8_string_param(key, OSSL_PKEY_PARAM_GROUP_NAME, out, cap, &len) == 1;
}

void risc_ossl_last_error(char *buf, size_t cap) {
    unsigned long code = ERR_peek_last_error();
    if (cap > 0) buf[0] = 0;
    if (code != 0) ERR_error_string_n(code, buf, cap);
    ERR_clear_error();
}

int risc_ossl_is_rsa(const EVP_PKEY *key) { return EVP_PKEY_is_a(key, "RSA"); }
int risc_ossl_is_ec(const EVP_PKEY *key) { return EVP_PKEY_is_a(key, "EC"); }
int risc_ossl_is_ed25519(const EVP_PKEY *key) { return EVP_PKEY_is_a(key, "ED25519"); }
