#ifndef HOT_ZSTD_ORACLE_H
#define HOT_ZSTD_ORACLE_H

#include <stddef.h>
#include <stdint.h>

/// How libzstd ended.
enum {
    /// Every frame decoded (skippable frames skipped); `size` bytes written.
    ZSTD_ORACLE_OK = 0,
    /// libzstd refused the input; `error` names why.
    ZSTD_ORACLE_ERROR = 1,
    /// The frames decode to more than the output limit (`capacity - 1` bytes).
    ZSTD_ORACLE_OVER_LIMIT = 2,
    /// libzstd refused a frame's window as over `window_log_max`.
    ZSTD_ORACLE_WINDOW_TOO_LARGE = 3,
};

/// What `zstd_oracle_decode` found.
typedef struct {
    int status;
    size_t size;
    /// libzstd's error name (a static string), or NULL.
    const char *error;
} zstd_oracle_result;

/// How a dictionary is given to libzstd.
enum {
    /// No dictionary.
    ZSTD_ORACLE_NO_DICTIONARY = 0,
    /// Raw content whatever its first bytes (what `ZstdDictionary.prefix` means), for every frame.
    ZSTD_ORACLE_RAW_CONTENT = 1,
    /// Formatted when it starts with the dictionary magic, raw content otherwise (`ZstdDictionary(_:)`).
    ZSTD_ORACLE_AUTO = 2,
};

/// Decodes every frame of `source` with libzstd's streaming decoder, with windows up to
/// 2^`window_log_max` bytes, into `output`, whose `capacity` is one more than the most bytes
/// accepted: output that reaches `capacity` is over the limit and stops decoding.
zstd_oracle_result zstd_oracle_decode(
    const void *source, size_t source_size,
    const void *dictionary, size_t dictionary_size, int dictionary_mode,
    int window_log_max,
    void *output, size_t capacity);

/// libzstd's version string.
const char *zstd_oracle_version(void);

#endif
