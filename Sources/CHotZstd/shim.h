#ifndef HOT_CZSTD_SHIM_H
#define HOT_CZSTD_SHIM_H
#include <zstd.h>

/// `ZSTD_CONTENTSIZE_UNKNOWN` and `ZSTD_CONTENTSIZE_ERROR` are macros of a cast; Swift needs values.
static inline int hot_zstd_content_size_known(unsigned long long size) {
    return size != ZSTD_CONTENTSIZE_UNKNOWN && size != ZSTD_CONTENTSIZE_ERROR;
}
#endif
