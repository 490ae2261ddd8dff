/* Datasets: IDX loading and its rejections, directory lookup with .gz
 * fallback, synthetic data, shuffling and gathering. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* mkdtemp() */
#endif

#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zlib.h>

#include "dataset.h"
#include "support/scratch.h"

enum { PATH_CAPACITY = 512 };

typedef struct fixture {
    char dir[PATH_CAPACITY];
    char path[PATH_CAPACITY];
    char other[PATH_CAPACITY];
} fixture_t;

static int setup(void **state) {
    fixture_t *f = calloc(1, sizeof *f);
    if (f == NULL || bg_test_scratch_make(f->dir, sizeof f->dir, "dataset") != 0) {
        free(f);
        return -1;
    }
    *state = f;
    return 0;
}

static int teardown(void **state) {
    fixture_t *f = *state;
    int failed = bg_test_scratch_remove(f->dir);
    free(f);
    return failed;
}

static void join(char *out, const char *dir, const char *name) {
    int n = snprintf(out, PATH_CAPACITY, "%s/%s", dir, name);
    assert_true(n > 0 && n < PATH_CAPACITY);
}

/* Overwrites byte 3 of an IDX file's magic, its dimension count. */
static void set_dimension_count(const char *path, uint8_t ndim) {
    FILE *file = fopen(path, "r+b");
    assert_non_null(file);
    assert_int_equal(fseek(file, 3, SEEK_SET), 0);
    assert_int_equal(fputc(ndim, file), ndim);
    assert_int_equal(fclose(file), 0);
}

/* Writes an unsigned-byte IDX file (gzip when the name ends in .gz). */
static void write_idx(const char *path, int ndim, const uint32_t *dims, const uint8_t *data) {
    uint8_t header[4 + 4 * 4] = {0, 0, 0x08, (uint8_t)ndim};
    size_t size = 1;
    for (int i = 0; i < ndim; i++) {
        uint8_t *p = header + 4 + 4 * i;
        p[0] = (uint8_t)(dims[i] >> 24);
        p[1] = (uint8_t)(dims[i] >> 16);
        p[2] = (uint8_t)(dims[i] >> 8);
        p[3] = (uint8_t)dims[i];
        size *= dims[i];
    }
    size_t header_size = 4 + 4 * (size_t)ndim;
    size_t len = strlen(path);
    if (len > 3 && strcmp(path + len - 3, ".gz") == 0) {
        gzFile gz = gzopen(path, "wb");
        assert_non_null(gz);
        assert_int_equal(gzwrite(gz, header, (unsigned)header_size), (int)header_size);
        assert_int_equal(gzwrite(gz, data, (unsigned)size), (int)size);
        assert_int_equal(gzclose(gz), Z_OK);
    } else {
        FILE *file = fopen(path, "wb");
        assert_non_null(file);
        assert_int_equal(fwrite(header, 1, header_size, file), header_size);
        assert_int_equal(fwrite(data, 1, size, file), size);
        assert_int_equal(fclose(file), 0);
    }
}

/* Writes `count` images of h x w (pixel = sample + index) and labels
 * (sample % 10) under `images_name` and `labels_name` in the fixture dir. */
static void write_split(fixture_t *f, const char *images_name, const char *labels_name,
                        uint32_t count, uint32_t h, uint32_t w) {
    uint8_t *pixels = malloc((size_t)count * h * w);
    uint8_t *labels = malloc(count);
    assert_non_null(pixels);
    assert_non_null(labels);
    for (size_t i = 0; i < (size_t)count * h * w; i++) pixels[i] = (uint8_t)(i / (h * w) + i);
    for (uint32_t i = 0; i < count; i++) labels[i] = (uint8_t)(i % 10);
    uint32_t image_dims[] = {count, h, w};
    join(f->path, f->dir, images_name);
    write_idx(f->path, 3, image_dims, pixels);
    join(f->path, f->dir, labels_name);
    write_idx(f->path, 1, &count, labels);
    free(pixels);
    free(labels);
}

/* The status, and a message that contains `text` (and `name`, if given). */
static void check_error(bg_status_t st, bg_status_t expected, const char *name, const char *text) {
    const char *message = bg_error_message();
    if (st != expected || (name && strstr(message, name) == NULL) || strstr(message, text) == NULL)
        fail_msg("got %s \"%s\", wanted %s naming \"%s\" with \"%s\"", bg_status_name(st), message,
                 bg_status_name(expected), name ? name : "", text);
}

static void test_load_idx_scaling(void **state) {
    fixture_t *f = *state;
    const uint8_t pixels[] = {0, 255, 51, 102, 1, 2, 3, 4, 10, 20, 30, 40};
    const uint8_t labels[] = {0, 9, 3};
    uint32_t image_dims[] = {3, 2, 2}, label_dims[] = {3};
    join(f->path, f->dir, "images");
    join(f->other, f->dir, "labels");
    write_idx(f->path, 3, image_dims, pixels);
    write_idx(f->other, 1, label_dims, labels);

    bg_dataset_t *ds = NULL;
    assert_int_equal(bg_dataset_load_idx(f->path, f->other, 10, &ds), BG_OK);
    assert_int_equal(ds->count, 3);
    assert_int_equal(ds->shape.c, 1);
    assert_int_equal(ds->shape.h, 2);
    assert_int_equal(ds->shape.w, 2);
    assert_int_equal(ds->classes, 10);
    /* The bytes are kept as they are, and handed out as x / 255. */
    assert_memory_equal(ds->pixels, pixels, 12);
    float values[12];
    bg_dataset_images(ds, 0, 3, values);
    assert_true(values[0] == 0.0f);
    assert_true(values[1] == 1.0f);
    assert_true(values[2] == 0.2f);
    assert_true(values[3] == 0.4f);
    for (int i = 0; i < 12; i++) assert_true(values[i] == (float)pixels[i] / 255.0f);
    bg_dataset_images(ds, 2, 1, values);
    for (int i = 0; i < 4; i++) assert_true(values[i] == (float)pixels[8 + i] / 255.0f);
    assert_int_equal(ds->labels[0], 0);
    assert_int_equal(ds->labels[1], 9);
    assert_int_equal(ds->labels[2], 3);
    bg_dataset_destroy(ds);
}

static void test_count_mismatch(void **state) {
    fixture_t *f = *state;
    const uint8_t pixels[12] = {0};
    const uint8_t labels[2] = {0};
    uint32_t image_dims[] = {3, 2, 2}, label_dims[] = {2};
    join(f->path, f->dir, "images");
    join(f->other, f->dir, "labels");
    write_idx(f->path, 3, image_dims, pixels);
    write_idx(f->other, 1, label_dims, labels);
    bg_dataset_t *sentinel = (bg_dataset_t *)(uintptr_t)0x1234;
    bg_dataset_t *ds = sentinel;
    assert_int_equal(bg_dataset_load_idx(f->path, f->other, 10, &ds), BG_ERR_PARSE);
    char expected[3 * PATH_CAPACITY];
    snprintf(expected, sizeof expected, "%s holds 3 images but %s holds 2 labels", f->path,
             f->other);
    assert_string_equal(bg_error_message(), expected);
    assert_ptr_equal(ds, sentinel);
}

static void test_label_out_of_range(void **state) {
    fixture_t *f = *state;
    uint8_t pixels[346] = {0};
    uint8_t labels[346];
    for (int i = 0; i < 346; i++) labels[i] = (uint8_t)(i % 10);
    labels[345] = 12;
    uint32_t image_dims[] = {346, 1, 1}, label_dims[] = {346};
    join(f->path, f->dir, "images");
    join(f->other, f->dir, "labels");
    write_idx(f->path, 3, image_dims, pixels);
    write_idx(f->other, 1, label_dims, labels);
    bg_dataset_t *ds = NULL;
    assert_int_equal(bg_dataset_load_idx(f->path, f->other, 10, &ds), BG_ERR_PARSE);
    char expected[2 * PATH_CAPACITY];
    snprintf(expected, sizeof expected, "%s: label 12 at index 345 is outside 0..9", f->other);
    assert_string_equal(bg_error_message(), expected);
    assert_null(ds);
    /* With 13 classes the same files are fine. */
    assert_int_equal(bg_dataset_load_idx(f->path, f->other, 13, &ds), BG_OK);
    assert_int_equal(ds->labels[345], 12);
    bg_dataset_destroy(ds);
}

static void test_wrong_dimensions(void **state) {
    fixture_t *f = *state;
    const uint8_t bytes[12] = {0};
    uint32_t flat_dims[] = {3, 4}, cube_dims[] = {3, 2, 2}, label_dims[] = {3, 1};
    bg_dataset_t *ds = NULL;
    join(f->path, f->dir, "flat");
    join(f->other, f->dir, "labels");
    write_idx(f->path, 2, flat_dims, bytes);
    write_idx(f->other, 2, label_dims, bytes);
    check_error(bg_dataset_load_idx(f->path, f->other, 10, &ds), BG_ERR_PARSE, f->path,
                "images must have 3 dimensions (count, height, width), the file has 2");
    join(f->path, f->dir, "cube");
    write_idx(f->path, 3, cube_dims, bytes);
    check_error(bg_dataset_load_idx(f->path, f->other, 10, &ds), BG_ERR_PARSE, f->other,
                "labels must have 1 dimension (count), the file has 2");
    join(f->other, f->dir, "missing");
    check_error(bg_dataset_load_idx(f->path, f->other, 10, &ds), BG_ERR_IO, f->other,
                "cannot read '");
    /* A header of the other kind (the dimension count, byte 3 of the
     * magic, of an images file on a labels file and the other way round)
     * is named by its dimensions, checked before the sizes that the rest
     * of the header, read the wrong way, would promise. */
    uint8_t values[64];
    for (int i = 0; i < 64; i++) values[i] = (uint8_t)(i % 10);
    uint32_t labels_dims[] = {64}, images_dims[] = {4, 4, 4};
    join(f->path, f->dir, "labels-marked-3d");
    join(f->other, f->dir, "images-marked-1d");
    write_idx(f->path, 1, labels_dims, values);
    set_dimension_count(f->path, 3);
    write_idx(f->other, 3, images_dims, values);
    set_dimension_count(f->other, 1);
    check_error(bg_dataset_load_idx(f->other, f->path, 10, &ds), BG_ERR_PARSE, f->other,
                "images must have 3 dimensions (count, height, width), the file has 1");
    join(f->other, f->dir, "cube");
    check_error(bg_dataset_load_idx(f->other, f->path, 10, &ds), BG_ERR_PARSE, f->path,
                "labels must have 1 dimension (count), the file has 3");
    assert_null(ds);
}

static void test_open_directory(void **state) {
    fixture_t *f = *state;
    write_split(f, "train-images-idx3-ubyte", "train-labels-idx1-ubyte", 5, 4, 3);
    write_split(f, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 3, 4, 3);
    bg_dataset_t *train = NULL, *test = NULL;
    bg_shape_t shape = {1, 4, 3};
    assert_int_equal(bg_dataset_open(f->dir, shape, 10, 1, &train, &test), BG_OK);
    assert_int_equal(train->count, 5);
    assert_int_equal(test->count, 3);
    assert_int_equal(train->shape.h, 4);
    assert_int_equal(train->shape.w, 3);
    assert_int_equal(test->classes, 10);
    /* Sample 4, pixel 5 of a 12-pixel image held 4 + (4 * 12 + 5) = 57. */
    assert_int_equal(train->pixels[4 * 12 + 5], 57);
    assert_int_equal(train->labels[4], 4);
    assert_int_equal(test->labels[2], 2);
    bg_dataset_destroy(train);
    bg_dataset_destroy(test);
}

static void test_open_gz_fallback(void **state) {
    fixture_t *f = *state;
    write_split(f, "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 6, 2, 2);
    write_split(f, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte.gz", 4, 2, 2);
    /* With both present the plain file wins: a broken .gz beside it is never read. */
    join(f->path, f->dir, "t10k-images-idx3-ubyte.gz");
    FILE *file = fopen(f->path, "wb");
    assert_non_null(file);
    fputs("\x1f\x8bnot gzip", file);
    fclose(file);

    bg_dataset_t *train = NULL, *test = NULL;
    bg_shape_t shape = {1, 2, 2};
    assert_int_equal(bg_dataset_open(f->dir, shape, 10, 1, &train, &test), BG_OK);
    assert_int_equal(train->count, 6);
    assert_int_equal(test->count, 4);
    assert_int_equal(train->pixels[5 * 4 + 3], 5 + 23);
    assert_int_equal(train->labels[5], 5);
    bg_dataset_destroy(train);
    bg_dataset_destroy(test);
}

static void test_open_missing(void **state) {
    fixture_t *f = *state;
    write_split(f, "train-images-idx3-ubyte", "train-labels-idx1-ubyte", 2, 2, 2);
    write_split(f, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 2, 2, 2);
    join(f->path, f->dir, "t10k-labels-idx1-ubyte");
    assert_int_equal(remove(f->path), 0);

    bg_dataset_t *sentinel = (bg_dataset_t *)(uintptr_t)0x1234;
    bg_dataset_t *train = sentinel, *test = sentinel;
    bg_shape_t shape = {1, 2, 2};
    const bg_status_t st = bg_dataset_open(f->dir, shape, 10, 1, &train, &test);
    char expected[3 * PATH_CAPACITY];
    snprintf(expected, sizeof expected, "tried %s and %s.gz", f->path, f->path);
    check_error(st, BG_ERR_IO, f->dir, expected);
    assert_null(strstr(bg_error_message(), "dataset-fashion-mnist"));
    assert_ptr_equal(train, sentinel);
    assert_ptr_equal(test, sentinel);
    /* A link to nothing in its place is named as one (until 2026-12-05 it
     * was "no t10k-labels-idx1-ubyte" beside the name ls shows), also
     * where a .gz lies beside it, which is not read in its stead; a .gz
     * link to nothing the same. */
    assert_int_equal(symlink("gone", f->path), 0);
    check_error(bg_dataset_open(f->dir, shape, 10, 1, &train, &test), BG_ERR_IO, f->path,
                ": a symbolic link to gone, which cannot be followed (No such file or directory)");
    char gz[PATH_CAPACITY + 3];
    snprintf(gz, sizeof gz, "%s.gz", f->path);
    FILE *file = fopen(gz, "wb");
    assert_non_null(file);
    fclose(file);
    check_error(bg_dataset_open(f->dir, shape, 10, 1, &train, &test), BG_ERR_IO, f->path,
                "a symbolic link to gone");
    assert_int_equal(remove(f->path), 0);
    assert_int_equal(remove(gz), 0);
    assert_int_equal(symlink("also-gone", gz), 0);
    check_error(bg_dataset_open(f->dir, shape, 10, 1, &train, &test), BG_ERR_IO, gz,
                ": a symbolic link to also-gone, which cannot be followed");
    assert_int_equal(remove(gz), 0);
    assert_ptr_equal(train, sentinel);
    assert_ptr_equal(test, sentinel);

    char nowhere[PATH_CAPACITY];
    join(nowhere, f->dir, "nowhere");
    /* A folder that is not there, as a misspelt name is not: what --data
     * takes. So is a file. */
    check_error(bg_dataset_open(nowhere, shape, 10, 1, &train, &test), BG_ERR_IO, nowhere,
                ": no such directory; it takes fashion-mnist, synthetic or a directory of IDX "
                "files");
    join(f->path, f->dir, "train-images-idx3-ubyte");
    check_error(bg_dataset_open(f->path, shape, 10, 1, &train, &test), BG_ERR_IO, f->path,
                ": not a directory; it takes fashion-mnist");
}

static void test_open_shape_mismatch(void **state) {
    fixture_t *f = *state;
    write_split(f, "train-images-idx3-ubyte", "train-labels-idx1-ubyte", 2, 28, 28);
    write_split(f, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 2, 28, 28);
    bg_dataset_t *train = NULL, *test = NULL;
    bg_shape_t shape = {3, 32, 32};
    assert_int_equal(bg_dataset_open(f->dir, shape, 10, 1, &train, &test), BG_ERR_INVALID);
    char expected[2 * PATH_CAPACITY];
    snprintf(expected, sizeof expected,
             "%s/train-images-idx3-ubyte: images are 1x28x28 but the model's input is 3x32x32 "
             "(an input line of channels=1 height=28 width=28 takes them; --data synthetic makes "
             "samples of any shape, for timing a model that has no data set)",
             f->dir);
    assert_string_equal(bg_error_message(), expected);
    assert_null(train);
    assert_null(test);

    /* Only the test split disagrees: the train split must not leak. */
    write_split(f, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 2, 28, 27);
    shape = (bg_shape_t){1, 28, 28};
    check_error(bg_dataset_open(f->dir, shape, 10, 1, &train, &test), BG_ERR_INVALID,
                "t10k-images-idx3-ubyte", "images are 1x28x27 but the model's input is 1x28x28");
    assert_null(train);
    assert_null(test);

    /* Labels 0 and 1 do not fit one class: said in the model's terms, and
       only once the shape fits. */
    write_split(f, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte", 2, 28, 28);
    check_error(bg_dataset_open(f->dir, shape, 1, 1, &train, &test), BG_ERR_INVALID,
                "train-labels-idx1-ubyte",
                "label 1 at index 1 is outside 0..0: the model has 1 class (the outputs of its "
                "softmax_cross_entropy)");
    check_error(bg_dataset_open(f->dir, (bg_shape_t){1, 28, 27}, 1, 1, &train, &test),
                BG_ERR_INVALID, "train-images-idx3-ubyte",
                "images are 1x28x28 but the model's input is 1x28x27");
    assert_null(train);
    assert_null(test);
    assert_int_equal(bg_dataset_open(f->dir, shape, 2, 1, &train, &test), BG_OK);
    assert_int_equal(train->classes, 2);

    /* A vector input of as many values (an MLP's 784x1x1) takes each
     * image's pixels in order; another shape of as many values is told
     * both ways to write it (a new user's MLP was sent to --data synthetic). */
    bg_dataset_t *vectors = NULL, *test_vectors = NULL;
    assert_int_equal(
        bg_dataset_open(f->dir, (bg_shape_t){784, 1, 1}, 2, 1, &vectors, &test_vectors), BG_OK);
    assert_int_equal(vectors->shape.c, 784);
    assert_int_equal(vectors->shape.h, 1);
    assert_int_equal(vectors->shape.w, 1);
    assert_int_equal(test_vectors->shape.c, 784);
    assert_int_equal(vectors->count, train->count);
    assert_memory_equal(vectors->pixels, train->pixels, (size_t)train->count * 784);
    bg_dataset_destroy(vectors);
    bg_dataset_destroy(test_vectors);
    bg_dataset_destroy(train);
    bg_dataset_destroy(test);
    train = test = NULL;
    check_error(bg_dataset_open(f->dir, (bg_shape_t){1, 784, 1}, 2, 1, &train, &test),
                BG_ERR_INVALID, "train-images-idx3-ubyte",
                "images are 1x28x28 but the model's input is 1x784x1 (input channels=1 height=28 "
                "width=28 takes them as they are, channels=784 height=1 width=1 as vectors of "
                "their values)");
    assert_null(train);
    check_error(bg_dataset_open(f->dir, (bg_shape_t){783, 1, 1}, 2, 1, &train, &test),
                BG_ERR_INVALID, "train-images-idx3-ubyte",
                "images are 1x28x28 but the model's input is 783x1x1 (an input line of "
                "channels=1 height=28 width=28 takes them; --data synthetic");
}

static void test_fashion_mnist(void **state) {
    (void)state;
    struct stat st;
    if (stat(BG_FASHION_MNIST_DIR, &st) != 0) skip();
    bg_dataset_t *train = NULL, *test = NULL;
    bg_shape_t shape = {1, 28, 28};
    bg_status_t status = bg_dataset_open("fashion-mnist", shape, 10, 1, &train, &test);
    if (status != BG_OK) fail_msg("%s", bg_error_message());
    assert_int_equal(train->count, 60000);
    assert_int_equal(test->count, 10000);
    assert_int_equal(train->shape.c, 1);
    assert_int_equal(train->shape.h, 28);
    assert_int_equal(train->shape.w, 28);
    int64_t histogram[10] = {0};
    for (int64_t i = 0; i < test->count; i++) histogram[test->labels[i]]++;
    for (int c = 0; c < 10; c++) assert_int_equal(histogram[c], 1000);
    int lo = 255, hi = 0;
    for (int64_t i = 0; i < test->count * 784; i++) {
        if (test->pixels[i] < lo) lo = test->pixels[i];
        if (test->pixels[i] > hi) hi = test->pixels[i];
    }
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 255);
    bg_dataset_destroy(train);
    bg_dataset_destroy(test);
}

static void test_fashion_mnist_missing(void **state) {
    (void)state;
    struct stat st;
    if (stat(BG_FASHION_MNIST_DIR, &st) == 0) skip();
    bg_dataset_t *train = NULL, *test = NULL;
    bg_shape_t shape = {1, 28, 28};
    check_error(bg_dataset_open("fashion-mnist", shape, 10, 1, &train, &test), BG_ERR_IO,
                BG_FASHION_MNIST_DIR "/train-images-idx3-ubyte.gz",
                "(install Debian's dataset-fashion-mnist package)");
    assert_null(train);
}

static void test_synthetic_deterministic(void **state) {
    (void)state;
    bg_shape_t shape = {2, 5, 3};
    bg_dataset_t *a = NULL, *b = NULL, *other_stream = NULL, *other_seed = NULL;
    assert_int_equal(bg_dataset_synthetic(shape, 7, 500, 42, 0, &a), BG_OK);
    assert_int_equal(bg_dataset_synthetic(shape, 7, 500, 42, 0, &b), BG_OK);
    assert_int_equal(bg_dataset_synthetic(shape, 7, 500, 42, 1, &other_stream), BG_OK);
    assert_int_equal(bg_dataset_synthetic(shape, 7, 500, 43, 0, &other_seed), BG_OK);
    /* A stream has a byte of the samples' generator stream. */
    bg_dataset_t *past = NULL;
    assert_int_equal(bg_dataset_synthetic(shape, 7, 500, 42, 256, &past), BG_ERR_INVALID);
    assert_null(past);
    assert_string_equal(bg_error_message(), "bg_dataset_synthetic: stream 256 past 255");
    assert_int_equal(a->count, 500);
    assert_int_equal(a->classes, 7);
    assert_int_equal(a->shape.c, 2);
    assert_int_equal(a->shape.h, 5);
    assert_int_equal(a->shape.w, 3);
    assert_memory_equal(a->pixels, b->pixels, 500 * 30);
    assert_memory_equal(a->labels, b->labels, 500 * sizeof(int32_t));

    int same_labels = 0, same_pixels = 0, clamped_low = 0, clamped_high = 0;
    int class_seen[7] = {0};
    for (int i = 0; i < 500; i++) {
        assert_in_range(a->labels[i], 0, 6);
        class_seen[a->labels[i]]++;
        same_labels += a->labels[i] == other_stream->labels[i];
    }
    int distinct[256] = {0};
    for (int i = 0; i < 500 * 30; i++) {
        uint8_t x = a->pixels[i];
        distinct[x] = 1;
        clamped_low += x == 0;
        clamped_high += x == 255;
        same_pixels += x == other_stream->pixels[i] || x == other_seed->pixels[i];
    }
    /* Rounded to bytes, the draws still take nearly every value between. */
    int values = 0;
    for (int v = 0; v < 256; v++) values += distinct[v];
    assert_in_range(values, 250, 256);
    /* Uniform labels: about 71 per class; 1/7 of the labels agree by chance. */
    for (int c = 0; c < 7; c++) assert_in_range(class_seen[c], 40, 110);
    assert_in_range(same_labels, 40, 110);
    /* Noise of 0.35 pushes some pixels past either end, but not most. */
    assert_in_range(clamped_low, 150, 3000);
    assert_in_range(clamped_high, 150, 3000);
    /* Equal bytes by chance (1 in 256 of the unclamped pixels, against
     * either of two sets) beside the clamped ones. */
    assert_true(same_pixels < clamped_low + clamped_high + 500 * 30 / 64);
    bg_dataset_destroy(a);
    bg_dataset_destroy(b);
    bg_dataset_destroy(other_stream);
    bg_dataset_destroy(other_seed);
}

/* Per-class mean images (classes, numel) of a synthetic set. */
static void class_means(const bg_dataset_t *ds, double *means) {
    int64_t numel = bg_shape_numel(ds->shape);
    int64_t seen[16] = {0};
    memset(means, 0, (size_t)(ds->classes * numel) * sizeof(double));
    for (int64_t s = 0; s < ds->count; s++) {
        seen[ds->labels[s]]++;
        for (int64_t i = 0; i < numel; i++)
            means[ds->labels[s] * numel + i] += ds->pixels[s * numel + i] / 255.0;
    }
    for (int64_t c = 0; c < ds->classes; c++)
        for (int64_t i = 0; i < numel; i++) means[c * numel + i] /= (double)seen[c];
}

/* Train and test streams share prototypes (their class means agree), other
 * seeds do not, and the classes are separable: a nearest-class-mean rule
 * fitted on the train stream labels the test stream well. */
static void test_synthetic_learnable(void **state) {
    (void)state;
    enum { CLASSES = 10, NUMEL = 64, COUNT = 4000 };
    bg_shape_t shape = {1, 8, 8};
    bg_dataset_t *train = NULL, *test = NULL, *other = NULL;
    assert_int_equal(bg_dataset_synthetic(shape, CLASSES, COUNT, 9, 0, &train), BG_OK);
    assert_int_equal(bg_dataset_synthetic(shape, CLASSES, COUNT, 9, 1, &test), BG_OK);
    assert_int_equal(bg_dataset_synthetic(shape, CLASSES, COUNT, 10, 1, &other), BG_OK);
    static double train_means[CLASSES * NUMEL], test_means[CLASSES * NUMEL],
        other_means[CLASSES * NUMEL];
    class_means(train, train_means);
    class_means(test, test_means);
    class_means(other, other_means);
    double same = 0.0, different = 0.0;
    for (int i = 0; i < CLASSES * NUMEL; i++) {
        same += fabs(train_means[i] - test_means[i]);
        different += fabs(train_means[i] - other_means[i]);
    }
    same /= CLASSES * NUMEL;
    different /= CLASSES * NUMEL;
    assert_true(same < 0.03);
    assert_true(different > 0.15);

    int correct = 0;
    for (int s = 0; s < COUNT; s++) {
        int best = -1;
        double best_distance = INFINITY;
        for (int c = 0; c < CLASSES; c++) {
            double d = 0.0;
            for (int i = 0; i < NUMEL; i++) {
                double e = test->pixels[s * NUMEL + i] / 255.0 - train_means[c * NUMEL + i];
                d += e * e;
            }
            if (d < best_distance) {
                best_distance = d;
                best = c;
            }
        }
        correct += best == test->labels[s];
    }
    assert_true(correct > COUNT * 9 / 10);
    bg_dataset_destroy(train);
    bg_dataset_destroy(test);
    bg_dataset_destroy(other);
}

static void test_open_synthetic(void **state) {
    (void)state;
    bg_shape_t shape = {1, 4, 4};
    bg_dataset_t *train = NULL, *test = NULL, *expected = NULL;
    assert_int_equal(bg_dataset_open("synthetic", shape, 10, 5, &train, &test), BG_OK);
    assert_int_equal(train->count, 8192);
    assert_int_equal(test->count, 2048);
    assert_int_equal(test->shape.h, 4);
    assert_int_equal(train->classes, 10);
    assert_int_equal(bg_dataset_synthetic(shape, 10, 8192, 5, 0, &expected), BG_OK);
    assert_memory_equal(train->pixels, expected->pixels, 8192 * 16);
    assert_memory_equal(train->labels, expected->labels, 8192 * sizeof(int32_t));
    bg_dataset_destroy(expected);
    assert_int_equal(bg_dataset_synthetic(shape, 10, 2048, 5, 1, &expected), BG_OK);
    assert_memory_equal(test->pixels, expected->pixels, 2048 * 16);
    bg_dataset_destroy(expected);
    bg_dataset_destroy(train);
    bg_dataset_destroy(test);
}

/* --data synthetic: 8,192 and 2,048 samples up to 1 GiB in all with the
 * class prototypes (a byte a sample's value, 4 a prototype's), then as
 * many in that proportion as fit: 10,240 samples of 3x512x512 took
 * 8,053,063,680 bytes (7.5 GiB) until 2026-12-05. */
static void test_synthetic_counts(void **state) {
    (void)state;
    int64_t train = 0, test = 0;
    bg_dataset_synthetic_counts((bg_shape_t){1, 28, 28}, 10, &train, &test);
    assert_int_equal(train, 8192);
    assert_int_equal(test, 2048);
    /* 104,449 values a sample is the largest that keeps 10,240 samples
     * and 10 prototypes within 1 GiB: 104,449 x (10,240 + 40) bytes. */
    bg_dataset_synthetic_counts((bg_shape_t){1, 1, 104449}, 10, &train, &test);
    assert_int_equal(train, 8192);
    bg_dataset_synthetic_counts((bg_shape_t){1, 1, 104450}, 10, &train, &test);
    assert_int_equal(train, 8191);
    bg_dataset_synthetic_counts((bg_shape_t){3, 512, 512}, 10, &train, &test);
    assert_int_equal(train, 1060);
    assert_int_equal(test, 265);
    assert_true((train + test + 40) * 3 * 512 * 512 <= (int64_t)1 << 30);
    /* More classes, fewer samples. */
    bg_dataset_synthetic_counts((bg_shape_t){3, 512, 512}, 100, &train, &test);
    assert_int_equal(train, 772);
    /* Prototypes alone past 1 GiB: one sample each. */
    bg_dataset_synthetic_counts((bg_shape_t){3, 4096, 4096}, 10, &train, &test);
    assert_int_equal(train, 1);
    assert_int_equal(test, 1);
}

static void test_synthetic_invalid(void **state) {
    (void)state;
    bg_dataset_t *sentinel = (bg_dataset_t *)(uintptr_t)0x1234;
    bg_dataset_t *ds = sentinel;
    bg_shape_t shape = {1, 4, 4};
    check_error(bg_dataset_synthetic(shape, 0, 10, 1, 0, &ds), BG_ERR_INVALID, NULL, "0 classes");
    check_error(bg_dataset_synthetic(shape, 10, 0, 1, 0, &ds), BG_ERR_INVALID, NULL, "0 samples");
    shape.w = 0;
    check_error(bg_dataset_synthetic(shape, 10, 10, 1, 0, &ds), BG_ERR_INVALID, NULL,
                "shape 1x4x0");
    shape = (bg_shape_t){1 << 20, 1 << 20, 1 << 20};
    check_error(bg_dataset_synthetic(shape, 10, 10, 1, 0, &ds), BG_ERR_INVALID, NULL,
                "do not fit in memory");
    assert_ptr_equal(ds, sentinel);
    bg_dataset_t *test = sentinel;
    /* --data synthetic makes one sample of a shape this large, which no
     * machine's memory holds: refused before it is asked for. */
    check_error(bg_dataset_open("synthetic", shape, 10, 1, &ds, &test), BG_ERR_NOMEM, NULL,
                "dataset: 1 sample of shape 1048576x1048576x1048576 takes 1152921504606846976 "
                "bytes, more than this machine's ");
    assert_ptr_equal(ds, sentinel);
    assert_ptr_equal(test, sentinel);
}

static void test_shuffle(void **state) {
    (void)state;
    enum { COUNT = 1000 };
    int64_t a[COUNT], b[COUNT], c[COUNT];
    bg_rng_t rng;
    bg_rng_seed(&rng, 3, 7);
    bg_dataset_shuffle(COUNT, a, &rng);
    bg_rng_seed(&rng, 3, 7);
    bg_dataset_shuffle(COUNT, b, &rng);
    bg_rng_seed(&rng, 4, 7);
    bg_dataset_shuffle(COUNT, c, &rng);
    assert_memory_equal(a, b, sizeof a);

    int seen[COUNT] = {0};
    int fixed = 0, same_as_c = 0;
    for (int i = 0; i < COUNT; i++) {
        assert_in_range(a[i], 0, COUNT - 1);
        seen[a[i]]++;
        fixed += a[i] == i;
        same_as_c += a[i] == c[i];
    }
    for (int i = 0; i < COUNT; i++) assert_int_equal(seen[i], 1);
    /* A random permutation has one fixed point on average. */
    assert_true(fixed < 10);
    assert_true(same_as_c < 10);

    /* Every position of a 3-element shuffle receives every element. */
    int where[3][3] = {{0}};
    for (int t = 0; t < 600; t++) {
        int64_t small[3];
        bg_dataset_shuffle(3, small, &rng);
        for (int i = 0; i < 3; i++) where[i][small[i]]++;
    }
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) assert_in_range(where[i][j], 140, 260);

    int64_t one = 5;
    bg_dataset_shuffle(1, &one, &rng);
    assert_int_equal(one, 0);
    bg_dataset_shuffle(0, NULL, &rng);
}

static void test_gather(void **state) {
    (void)state;
    bg_shape_t shape = {2, 3, 2};
    bg_dataset_t *ds = NULL;
    assert_int_equal(bg_dataset_synthetic(shape, 4, 20, 1, 0, &ds), BG_OK);
    const int64_t order[] = {5, 0, 19, 5};
    float images[4 * 12];
    int32_t labels[4];
    bg_dataset_gather(ds, order, 4, images, labels);
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 12; i++)
            assert_true(images[k * 12 + i] == (float)ds->pixels[order[k] * 12 + i] / 255.0f);
        assert_int_equal(labels[k], ds->labels[order[k]]);
    }
    float *all = bg_dataset_all_images(ds);
    assert_non_null(all);
    assert_memory_equal(images + 12, all, 12 * sizeof(float)); /* sample 0 */
    assert_memory_equal(images + 24, all + 19 * 12, 12 * sizeof(float));
    free(all);
    bg_dataset_destroy(ds);
}

/* The CRC a checkpoint records of its data: the pixels as stored, then
 * the labels as little-endian int32 (the figures from Python's zlib.crc32
 * of those bytes); 1,100 labels cross the 1,024 the CRC takes at a time.
 * A changed label changes it. */
static void test_crc32(void **state) {
    (void)state;
    uint8_t pixels[8] = {1, 2, 3, 4, 250, 0, 7, 9};
    int32_t labels[2] = {5, 300};
    bg_dataset_t ds = {.count = 2, .shape = {1, 2, 2}, .pixels = pixels, .labels = labels};
    assert_true(bg_dataset_crc32(&ds) == UINT32_C(0x158efb9a));
    labels[0] = 6;
    assert_true(bg_dataset_crc32(&ds) != UINT32_C(0x158efb9a));

    enum { MANY = 1100 };
    uint8_t many_pixels[MANY];
    int32_t many_labels[MANY];
    for (int i = 0; i < MANY; i++) {
        many_pixels[i] = (uint8_t)(i % 251);
        many_labels[i] = i % 10;
    }
    bg_dataset_t many = {
        .count = MANY, .shape = {1, 1, 1}, .pixels = many_pixels, .labels = many_labels};
    assert_true(bg_dataset_crc32(&many) == UINT32_C(0xc6ef43db));
}

static void test_destroy_null(void **state) {
    (void)state;
    bg_dataset_destroy(NULL);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_load_idx_scaling, setup, teardown),
        cmocka_unit_test_setup_teardown(test_count_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_label_out_of_range, setup, teardown),
        cmocka_unit_test_setup_teardown(test_wrong_dimensions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_directory, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_gz_fallback, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_open_shape_mismatch, setup, teardown),
        cmocka_unit_test(test_fashion_mnist),
        cmocka_unit_test(test_fashion_mnist_missing),
        cmocka_unit_test(test_synthetic_deterministic),
        cmocka_unit_test(test_synthetic_learnable),
        cmocka_unit_test(test_open_synthetic),
        cmocka_unit_test(test_synthetic_counts),
        cmocka_unit_test(test_synthetic_invalid),
        cmocka_unit_test(test_shuffle),
        cmocka_unit_test(test_gather),
        cmocka_unit_test(test_crc32),
        cmocka_unit_test(test_destroy_null),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
