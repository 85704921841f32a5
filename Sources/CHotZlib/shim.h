#ifndef HOT_CZLIB_SHIM_H
#define HOT_CZLIB_SHIM_H
#include <zlib.h>

/// `inflateInit2` is a macro; Swift needs a function.
static inline int hot_inflateInit2(z_streamp strm, int windowBits) {
    return inflateInit2(strm, windowBits);
}

/// `deflateInit2` is a macro; Swift needs a function.
static inline int hot_deflateInit2(z_streamp strm, int level, int windowBits, int memLevel) {
    return deflateInit2(strm, level, Z_DEFLATED, windowBits, memLevel, Z_DEFAULT_STRATEGY);
}
#endif
