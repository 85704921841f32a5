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
#endif
