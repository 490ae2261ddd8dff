/* Exhaustive corruption of a small checkpoint: every single-bit flip, every
 * other value of every byte, every truncation and a few extensions must be
 * refused by bg_checkpoint_load (and bg_checkpoint_parse) with BG_ERR_PARSE
 * or BG_ERR_INVALID, never accepted, never a crash (the suite also runs
 * under ASan+UBSan). The header checksum covers every header byte, padding
 * included, and the tensor checksums every data byte (docs/checkpoints.md),
 * so there are no exceptions to allow for. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* mkdtemp, pwrite */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint.h"
#include "model_spec.h"
#include "safetensors.h"

/* 1.weight (3, 16) and 1.bias (3): 204 bytes of data. */
static const char tiny_model[] = "input channels=1 height=4 width=4\n"
                                 "flatten\n"
                                 "dense units=3\n"
                                 "softmax_cross_entropy\n";

typedef struct fixture {
    char dir[64];
    char path[128];
    bg_model_spec_t *spec;
    float *params, *loaded;
    uint8_t *original; /* the checkpoint's bytes */
    size_t size;
    size_t header_end; /* 8 + header length: where the data starts */
} fixture_t;

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof *f);
    assert_non_null(f);
    snprintf(f->dir, sizeof f->dir, "/tmp/test_checkpoint_corruption.XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->path, sizeof f->path, "%s/tiny.safetensors", f->dir);
    assert_int_equal(bg_model_spec_parse("tiny.model", tiny_model, strlen(tiny_model), &f->spec),
                     BG_OK);
    assert_int_equal(f->spec->total_params, 51);
    f->params = malloc(sizeof(float) * 51);
    f->loaded = malloc(sizeof(float) * 51);
    assert_non_null(f->params);
    assert_non_null(f->loaded);
    for (int i = 0; i < 51; i++) f->params[i] = (float)(i - 25) / 8.0f;
    assert_int_equal(bg_checkpoint_save(f->path, f->spec, f->params, 12345), BG_OK);

    FILE *in = fopen(f->path, "rb");
    assert_non_null(in);
    assert_int_equal(fseek(in, 0, SEEK_END), 0);
    f->size = (size_t)ftell(in);
    rewind(in);
    f->original = malloc(f->size);
    assert_non_null(f->original);
    assert_int_equal(fread(f->original, 1, f->size, in), f->size);
    fclose(in);
    f->header_end = 8;
    for (int i = 0; i < 8; i++) f->header_end += (size_t)f->original[i] << (8 * i);
    assert_int_equal(f->size - f->header_end, 51 * 4);
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    unlink(f->path);
    assert_int_equal(rmdir(f->dir), 0);
    bg_model_spec_destroy(f->spec);
    free(f->params);
    free(f->loaded);
    free(f->original);
    free(f);
    return 0;
}

/* Where a byte lies, for the tallies. */
enum { REGION_PREFIX, REGION_HEADER, REGION_DATA, REGIONS };
static const char *const region_names[REGIONS] = {"length prefix", "header", "data"};

static int region_of(const fixture_t *f, size_t at) {
    return at < 8 ? REGION_PREFIX : at < f->header_end ? REGION_HEADER : REGION_DATA;
}

/* Loads the file at f->path, which holds `bytes`, and parses `bytes` in
 * memory; both must refuse with PARSE or INVALID and agree. Returns the
 * status. */
static bg_status_t expect_refused(fixture_t *f, const uint8_t *bytes, size_t size, const char *what,
                                  size_t at, unsigned value) {
    bg_status_t loaded = bg_checkpoint_load(f->path, f->spec, f->loaded, NULL);
    if (loaded != BG_ERR_PARSE && loaded != BG_ERR_INVALID)
        fail_msg("%s at byte %zu (0x%02x): load gave %s: %s", what, at, value,
                 bg_status_name(loaded), bg_error_message());
    if (strncmp(bg_error_message(), f->path, strlen(f->path)) != 0)
        fail_msg("%s at byte %zu: message does not name the file: %s", what, at,
                 bg_error_message());
    bg_status_t parsed = bg_checkpoint_parse("mem", bytes, size, f->spec, f->loaded, NULL);
    if (parsed != loaded)
        fail_msg("%s at byte %zu (0x%02x): parse gave %s, load %s", what, at, value,
                 bg_status_name(parsed), bg_status_name(loaded));
    return loaded;
}

/* Writes the original file, then changes one byte at a time in place. */
static int file_open_original(const fixture_t *f) {
    int fd = open(f->path, O_WRONLY | O_TRUNC | O_CREAT, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, f->original, f->size), (ssize_t)f->size);
    return fd;
}

static void byte_put(int fd, uint8_t *bytes, size_t at, uint8_t value) {
    bytes[at] = value;
    assert_int_equal(pwrite(fd, &value, 1, (off_t)at), 1);
}

static void test_intact_loads(void **state) {
    fixture_t *f = *state;
    bg_checkpoint_info_t info = {.step = 0};
    bg_status_t st = bg_checkpoint_load(f->path, f->spec, f->loaded, &info);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    assert_int_equal(info.step, 12345);
    assert_memory_equal(f->loaded, f->params, sizeof(float) * 51);
    assert_int_equal(bg_checkpoint_parse("mem", f->original, f->size, f->spec, f->loaded, &info),
                     BG_OK);
    /* Padding exists in this file, so the flips below do reach it. */
    assert_int_equal(f->original[f->header_end - 1], ' ');
}

static void test_every_bit_flip(void **state) {
    fixture_t *f = *state;
    uint8_t *bytes = malloc(f->size);
    assert_non_null(bytes);
    memcpy(bytes, f->original, f->size);
    int fd = file_open_original(f);
    int refused[REGIONS] = {0}, total[REGIONS] = {0}, data_checksum = 0;
    for (size_t at = 0; at < f->size; at++) {
        for (int bit = 0; bit < 8; bit++) {
            uint8_t value = (uint8_t)(f->original[at] ^ (1u << bit));
            byte_put(fd, bytes, at, value);
            bg_status_t st = expect_refused(f, bytes, f->size, "bit flip", at, value);
            int region = region_of(f, at);
            total[region]++;
            refused[region] += st != BG_OK;
            if (region == REGION_DATA && strstr(bg_error_message(), "is corrupt (checksum"))
                data_checksum++;
        }
        byte_put(fd, bytes, at, f->original[at]);
    }
    close(fd);
    for (int r = 0; r < REGIONS; r++) {
        print_message("bit flips in the %s: %d of %d refused\n", region_names[r], refused[r],
                      total[r]);
        assert_int_equal(refused[r], total[r]);
    }
    assert_int_equal(total[REGION_PREFIX] + total[REGION_HEADER] + total[REGION_DATA],
                     (int)f->size * 8);
    /* Every data flip is caught by the tensor checksums themselves. */
    assert_int_equal(data_checksum, total[REGION_DATA]);
    free(bytes);
}

static void test_every_byte_value(void **state) {
    fixture_t *f = *state;
    uint8_t *bytes = malloc(f->size);
    assert_non_null(bytes);
    memcpy(bytes, f->original, f->size);
    int fd = file_open_original(f);
    int refused = 0, total = 0;
    for (size_t at = 0; at < f->size; at++) {
        for (unsigned value = 0; value < 256; value++) {
            if (value == f->original[at]) continue;
            byte_put(fd, bytes, at, (uint8_t)value);
            refused += expect_refused(f, bytes, f->size, "byte change", at, value) != BG_OK;
            total++;
        }
        byte_put(fd, bytes, at, f->original[at]);
    }
    close(fd);
    print_message("byte changes: %d of %d refused (%zu bytes x 255 values)\n", refused, total,
                  f->size);
    assert_int_equal(total, (int)f->size * 255);
    assert_int_equal(refused, total);
    free(bytes);
}

static void test_every_truncation(void **state) {
    fixture_t *f = *state;
    int refused = 0;
    for (size_t len = 0; len < f->size; len++) {
        int fd = open(f->path, O_WRONLY | O_TRUNC | O_CREAT, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, f->original, len), (ssize_t)len);
        close(fd);
        uint8_t *exact = malloc(len ? len : 1); /* exact size: ASan sees overreads */
        assert_non_null(exact);
        memcpy(exact, f->original, len);
        refused += expect_refused(f, exact, len, "truncation", len, 0) != BG_OK;
        free(exact);
    }
    print_message("truncations: %d of %zu refused\n", refused, f->size);
    assert_int_equal(refused, (int)f->size);

    /* Growing the file is caught too: the tensors no longer tile the data. */
    uint8_t *longer = malloc(f->size + 8);
    assert_non_null(longer);
    memcpy(longer, f->original, f->size);
    memset(longer + f->size, ' ', 8);
    for (size_t extra = 1; extra <= 8; extra++) {
        int fd = open(f->path, O_WRONLY | O_TRUNC | O_CREAT, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, longer, f->size + extra), (ssize_t)(f->size + extra));
        close(fd);
        assert_int_equal(expect_refused(f, longer, f->size + extra, "extension", extra, 0),
                         BG_ERR_PARSE);
    }
    free(longer);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_intact_loads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_bit_flip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_byte_value, setup, teardown),
        cmocka_unit_test_setup_teardown(test_every_truncation, setup, teardown),
    };
    return cmocka_run_group_tests_name("checkpoint_corruption", tests, NULL, NULL);
}
