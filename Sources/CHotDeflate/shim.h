#ifndef HOT_CDEFLATE_SHIM_H
#define HOT_CDEFLATE_SHIM_H
/// libdeflate: whole-buffer raw deflate decoding and CRC-32, faster than zlib's streaming
/// inflate for entries whose sizes the archive declares.
#include <libdeflate.h>
#endif
