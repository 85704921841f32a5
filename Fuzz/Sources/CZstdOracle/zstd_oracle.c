// libzstd as the fuzzer's oracle: the system library (Debian's libzstd-dev), linked
// through this target's module map, never instrumented by the fuzzer.
#define ZSTD_STATIC_LINKING_ONLY
#include <zstd.h>
#include <zstd_errors.h>

#include "zstd_oracle.h"

zstd_oracle_result zstd_oracle_decode(
    const void *source, size_t source_size,
    const void *dictionary, size_t dictionary_size, int dictionary_mode,
    int window_log_max,
    void *output, size_t capacity) {
    zstd_oracle_result result = {ZSTD_ORACLE_ERROR, 0, NULL};
    ZSTD_DCtx *context = ZSTD_createDCtx();
    if (context == NULL) {
        result.error = "cannot create a context";
        return result;
    }
    size_t code = ZSTD_DCtx_setParameter(context, ZSTD_d_windowLogMax, window_log_max);
    if (!ZSTD_isError(code) && dictionary_mode != ZSTD_ORACLE_NO_DICTIONARY) {
        // Loaded (not referenced as a prefix, which serves one frame only): every frame uses it.
        code = ZSTD_DCtx_loadDictionary_advanced(
            context, dictionary, dictionary_size, ZSTD_dlm_byRef,
            dictionary_mode == ZSTD_ORACLE_RAW_CONTENT ? ZSTD_dct_rawContent : ZSTD_dct_auto);
    }
    if (ZSTD_isError(code)) {
        result.error = ZSTD_getErrorName(code);
        ZSTD_freeDCtx(context);
        return result;
    }
    ZSTD_inBuffer in = {source, source_size, 0};
    ZSTD_outBuffer out = {output, capacity, 0};
    size_t last = 0;
    int started = 0;
    while (in.pos < in.size || (started && last != 0 && out.pos < out.size)) {
        size_t before_in = in.pos, before_out = out.pos;
        last = ZSTD_decompressStream(context, &out, &in);
        started = 1;
        if (ZSTD_isError(last)) {
            result.status = ZSTD_getErrorCode(last) == ZSTD_error_frameParameter_windowTooLarge
                ? ZSTD_ORACLE_WINDOW_TOO_LARGE : ZSTD_ORACLE_ERROR;
            result.error = ZSTD_getErrorName(last);
            result.size = out.pos;
            ZSTD_freeDCtx(context);
            return result;
        }
        if (out.pos == out.size) {
            result.status = ZSTD_ORACLE_OVER_LIMIT;
            result.size = out.pos;
            ZSTD_freeDCtx(context);
            return result;
        }
        if (in.pos == before_in && out.pos == before_out && last != 0) {
            // No progress: the input ends inside a frame.
            break;
        }
    }
    ZSTD_freeDCtx(context);
    result.size = out.pos;
    if (last != 0) {
        result.error = "the input ends inside a frame";
        return result;
    }
    result.status = ZSTD_ORACLE_OK;
    return result;
}

const char *zstd_oracle_version(void) { return ZSTD_versionString(); }
