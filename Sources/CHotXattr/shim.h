#ifndef HOT_CXATTR_SHIM_H
#define HOT_CXATTR_SHIM_H
/// Extended attributes (part of the C library on Linux and Apple platforms; no library to
/// link): the store marks an object taken on a package's recorded digest with one.
#include <sys/types.h>
#include <sys/xattr.h>
#endif
