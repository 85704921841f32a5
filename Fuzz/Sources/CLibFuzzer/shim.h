#ifndef HOT_LIBFUZZER_SHIM_H
#define HOT_LIBFUZZER_SHIM_H

#include <stddef.h>
#include <stdint.h>

/// libFuzzer's entry point for programs that have their own `main`
/// (defined in libclang_rt.fuzzer, linked by `-sanitize=fuzzer`).
int LLVMFuzzerRunDriver(int *argc, char ***argv, int (*callback)(const uint8_t *data, size_t size));

#endif
