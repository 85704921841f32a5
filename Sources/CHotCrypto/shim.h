#ifndef HOT_CCRYPTO_SHIM_H
#define HOT_CCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/rsa.h>
#include <openssl/md5.h>
#include <openssl/sha.h>
#include <openssl/crypto.h>
#include <openssl/params.h>

/* An HMAC-SHA1 context keyed with `key` (OpenSSL 3's EVP_MAC; the digest is named through an
   OSSL_PARAM, which Swift cannot build), or NULL. Free it with EVP_MAC_CTX_free. */
static inline EVP_MAC_CTX *hot_hmac_sha1_new(const unsigned char *key, size_t length) {
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    if (mac == NULL) return NULL;
    EVP_MAC_CTX *context = EVP_MAC_CTX_new(mac);
    EVP_MAC_free(mac);
    if (context == NULL) return NULL;
    char digest[] = "SHA1";
    OSSL_PARAM parameters[2];
    parameters[0] = OSSL_PARAM_construct_utf8_string("digest", digest, 0);
    parameters[1] = OSSL_PARAM_construct_end();
    if (EVP_MAC_init(context, key, length, parameters) != 1) {
        EVP_MAC_CTX_free(context);
        return NULL;
    }
    return context;
}
#endif
