/* The bodies of brigade's fuzz targets, one per parser, shared by the
 * libFuzzer entry points (fuzz/fuzz_*.c, built by scripts/fuzz.sh) and the
 * corpus replay test (tests/test_fuzz_corpus.c, built by meson), so every
 * corpus file is checked in CI with the same properties even without clang.
 *
 * Each takes any bytes and returns whether the parser accepted them (so the
 * replay test can hold "ok-*" seeds to BG_OK and "bad-*" seeds to a
 * refusal). Besides "no crash, no leak, no undefined behaviour" (the
 * sanitizers' job), each checks what the parser promises and calls abort()
 * with a message on stderr when it does not hold: failures leave *out
 * untouched and name the input; successes are internally consistent (see
 * targets.c). */
#ifndef BG_FUZZ_TARGETS_H
#define BG_FUZZ_TARGETS_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bg_model_spec_parse; returns its status. */
bg_status_t bg_fuzz_model_spec(const uint8_t *data, size_t size);

/* bg_idx_parse; returns its status. */
bg_status_t bg_fuzz_idx(const uint8_t *data, size_t size);

/* bg_safetensors_parse, bg_checkpoint_verify, bg_checkpoint_parse for two
 * small models, and a header re-encoding round trip for F32 files. Returns
 * the status of parse and verify, i.e. whether bg_checkpoint_read would
 * accept the file. */
bg_status_t bg_fuzz_safetensors(const uint8_t *data, size_t size);

/* bg_profile_parse against a small conv2d model, and what the planner
 * reads of what it accepts (timed sizes, every layer's price at any size,
 * the stage entries). Returns its status. */
bg_status_t bg_fuzz_profile(const uint8_t *data, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* BG_FUZZ_TARGETS_H */
