#ifndef HOT_CP11KIT_SHIM_H
#define HOT_CP11KIT_SHIM_H
// p11-kit: loading PKCS#11 modules and parsing RFC 7512 URIs; its pkcs11.h declares the
// PKCS#11 interface itself.
#include <p11-kit/p11-kit.h>
#include <p11-kit/uri.h>
#include <p11-kit/pkcs11.h>
#endif
