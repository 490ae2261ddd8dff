/* libFuzzer entry point for bg_fuzz_profile (fuzz/targets.c); built and run by
 * scripts/fuzz.sh. */
#include <stddef.h>
#include <stdint.h>

#include "targets.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    (void)bg_fuzz_profile(data, size);
    return 0; /* libFuzzer reserves other values */
}
