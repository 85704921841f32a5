#ifndef HOT_BENCH_ZSTD_SHIM_H
#define HOT_BENCH_ZSTD_SHIM_H
// libzstd for hot-bench zstd, the reference HotArchive's decoder is measured against.
// ZSTD_getFrameHeader and ZSTD_frameHeader are in its "static linking only" section (exported
// by the shared library all the same).
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#endif
