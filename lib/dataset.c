/* Datasets in host memory: MNIST-format IDX files or generated samples. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* access() */
#endif

#include "dataset.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "crc32.h"
#include "host_memory.h"
#include "idx.h"
#include "path.h"

enum { DATASET_PATH_MAX = BG_DATASET_PATH_MAX };

/* The generator streams of synthetic data, tagged past every layer's
 * (layer.c seeds layer i's weights with stream i), as the shuffle's is:
 * the prototypes' "SYNTP" in ASCII, a set's samples "SYNTS" with the set's
 * stream (0 training, 1 test) in a byte below it. Until 2026-12-06 they
 * were 1000 and 2000, and layer 1000's initial weights were the class
 * prototypes scaled (a review). */
static const uint64_t SYNTHETIC_PROTOTYPE_STREAM = UINT64_C(0x53594e5450),
                      SYNTHETIC_SAMPLE_STREAM = UINT64_C(0x53594e545300);

/* Noise around each class prototype: with prototypes uniform in [0, 1) the
 * classes overlap pixel by pixel, so a model has to combine many pixels. */
static const double SYNTHETIC_NOISE = 0.35;

static const char *const TRAIN_IMAGES = "train-images-idx3-ubyte";
static const char *const TRAIN_LABELS = "train-labels-idx1-ubyte";
static const char *const TEST_IMAGES = "t10k-images-idx3-ubyte";
static const char *const TEST_LABELS = "t10k-labels-idx1-ubyte";

/* Whether `count` samples of `shape` (each dimension positive) fit in a
 * size_t byte count, so the allocations below cannot overflow. */
static int dataset_fits(bg_shape_t shape, int64_t count) {
    uint64_t limit = SIZE_MAX / sizeof(float);
    uint64_t numel = (uint64_t)shape.c;
    if ((uint64_t)shape.h > limit / numel) return 0;
    numel *= (uint64_t)shape.h;
    if ((uint64_t)shape.w > limit / numel) return 0;
    numel *= (uint64_t)shape.w;
    return (uint64_t)count <= limit / numel;
}

/* Allocates a dataset of `count` samples of `shape`, contents unset; its
 * pixels too unless the caller brings them (`with_pixels` 0: NULL). */
static bg_status_t dataset_alloc(bg_shape_t shape, int64_t classes, int64_t count, int with_pixels,
                                 bg_dataset_t **out) {
    if (shape.c <= 0 || shape.h <= 0 || shape.w <= 0 || count <= 0 || classes <= 0 ||
        classes > INT32_MAX)
        return bg_error_set(BG_ERR_INVALID,
                            "dataset: shape %lldx%lldx%lld, %lld samples, %lld classes: all must "
                            "be positive (classes at most %d)",
                            (long long)shape.c, (long long)shape.h, (long long)shape.w,
                            (long long)count, (long long)classes, INT32_MAX);
    if (!dataset_fits(shape, count))
        return bg_error_set(BG_ERR_INVALID,
                            "dataset: %lld sample%s of shape %lldx%lldx%lld do%s not fit in memory",
                            (long long)count, count == 1 ? "" : "s", (long long)shape.c,
                            (long long)shape.h, (long long)shape.w, count == 1 ? "es" : "");

    bg_status_t st = BG_OK;
    size_t numel = (size_t)bg_shape_numel(shape);
    bg_dataset_t *ds = calloc(1, sizeof *ds);
    BG_ALLOC_CHECK_GOTO(ds, st, fail);
    ds->count = count;
    ds->shape = shape;
    ds->classes = classes;
    /* The one large allocation of a dataset: said in its own words. More
     * than the machine's memory is not asked for (a sanitizer's allocator
     * aborts on such a request rather than fail it). */
    const double bytes = (double)count * ((with_pixels ? (double)numel : 0) + sizeof(int32_t));
    const uint64_t host = bg_host_memory_bytes();
    if (with_pixels && host > 0 && bytes > (double)host) {
        st = bg_error_set(BG_ERR_NOMEM,
                          "dataset: %lld sample%s of shape %lldx%lldx%lld take%s %.0f bytes, more "
                          "than this machine's %llu",
                          (long long)count, count == 1 ? "" : "s", (long long)shape.c,
                          (long long)shape.h, (long long)shape.w, count == 1 ? "s" : "", bytes,
                          (unsigned long long)host);
        goto fail;
    }
    if (with_pixels) ds->pixels = malloc((size_t)count * numel);
    ds->labels = malloc((size_t)count * sizeof(int32_t));
    if ((with_pixels && ds->pixels == NULL) || ds->labels == NULL) {
        st = bg_error_set(BG_ERR_NOMEM,
                          "dataset: out of memory for %lld sample%s of shape %lldx%lldx%lld "
                          "(%.0f bytes)",
                          (long long)count, count == 1 ? "" : "s", (long long)shape.c,
                          (long long)shape.h, (long long)shape.w, bytes);
        goto fail;
    }
    *out = ds;
    return BG_OK;
fail:
    bg_dataset_destroy(ds);
    return st;
}

bg_status_t bg_dataset_load_idx(const char *images_path, const char *labels_path, int64_t classes,
                                bg_dataset_t **out) {
    if (images_path == NULL || labels_path == NULL || out == NULL)
        return bg_error_set(BG_ERR_INVALID, "bg_dataset_load_idx: NULL path or out");
    bg_status_t st = BG_OK;
    bg_idx_t *images = NULL, *labels = NULL;
    bg_dataset_t *ds = NULL;

    /* The dimensions are checked before the sizes, so that a labels file
     * given for images is named as such. */
    static const bg_idx_expect_t image_file = {3, "images", "count, height, width"},
                                 label_file = {1, "labels", "count"};
    BG_CHECK_GOTO(bg_idx_load_expecting(images_path, &image_file, &images), st, done);
    BG_CHECK_GOTO(bg_idx_load_expecting(labels_path, &label_file, &labels), st, done);
    if (images->dims[0] != labels->dims[0]) {
        st =
            bg_error_set(BG_ERR_PARSE, "%s holds %lld images but %s holds %lld labels", images_path,
                         (long long)images->dims[0], labels_path, (long long)labels->dims[0]);
        goto done;
    }

    int64_t count = images->dims[0];
    bg_shape_t shape = {1, images->dims[1], images->dims[2]};
    BG_CHECK_GOTO(dataset_alloc(shape, classes, count, 0, &ds), st, done);
    for (int64_t i = 0; i < count; i++) {
        int64_t label = labels->data[i];
        if (label >= classes) {
            st =
                bg_error_set(BG_ERR_PARSE, "%s: label %lld at index %lld is outside 0..%lld",
                             labels_path, (long long)label, (long long)i, (long long)(classes - 1));
            goto done;
        }
        ds->labels[i] = (int32_t)label;
    }
    /* The file's bytes become the dataset's, not a second copy of them. */
    ds->pixels = images->data;
    images->data = NULL;

    *out = ds;
    ds = NULL;
done:
    bg_dataset_destroy(ds);
    bg_idx_destroy(labels);
    bg_idx_destroy(images);
    return st;
}

/* Refuses `path` where it is a symbolic link that cannot be followed (to
 * nothing, or a loop): the name is there, so "no such file" would send
 * the reader looking for what they can see. */
static bg_status_t refuse_broken_link(const char *path) {
    struct stat info;
    if (lstat(path, &info) != 0 || !S_ISLNK(info.st_mode) || stat(path, &info) == 0) return BG_OK;
    const int error = errno;
    char target[DATASET_PATH_MAX];
    const ssize_t n = readlink(path, target, sizeof target - 1);
    target[n > 0 ? n : 0] = '\0';
    return bg_error_set(BG_ERR_IO, "%s: a symbolic link to %s, which cannot be followed (%s)", path,
                        target, strerror(error));
}

/* After access(path, F_OK) failed with `error`: a path that may be there
 * but cannot be looked at (a folder on the way without search permission,
 * EACCES) is no missing file, and is said so (until 2026-12-06 "no FILE:
 * tried ..."). */
static bg_status_t refuse_unreachable(const char *path, int error) {
    if (error == ENOENT || error == ENOTDIR) return BG_OK;
    return bg_error_set(BG_ERR_IO, "cannot look for '%s': %s", path, strerror(error));
}

/* Finds `dir`/`name`, else `dir`/`name`.gz, writing the one that exists into
 * `path` (the plain one where both are, as `gunzip -k` leaves them; the
 * docs say so; a plain one that is a broken link is refused, not passed
 * over). `hint` ends the message when neither is there. */
static bg_status_t find_file(const char *dir, const char *name, const char *hint,
                             char path[DATASET_PATH_MAX]) {
    int n = snprintf(path, DATASET_PATH_MAX, "%s%s%s", dir, bg_path_separator(dir), name);
    if (n < 0 || n + 3 >= DATASET_PATH_MAX)
        return bg_error_set(BG_ERR_INVALID, "%s: dataset directory path is too long", dir);
    if (access(path, F_OK) == 0) return BG_OK;
    int error = errno;
    BG_CHECK(refuse_broken_link(path));
    BG_CHECK(refuse_unreachable(path, error));
    strcat(path, ".gz");
    if (access(path, F_OK) == 0) return BG_OK;
    error = errno;
    BG_CHECK(refuse_broken_link(path));
    BG_CHECK(refuse_unreachable(path, error));
    const char *sep = bg_path_separator(dir);
    return bg_error_set(BG_ERR_IO, "%s: no %s: tried %s%s%s and %s%s%s.gz%s", dir, name, dir, sep,
                        name, dir, sep, name, hint);
}

/* Loads one split from `dir` and checks it matches the model's input. */
static bg_status_t load_split(const char *dir, const char *images_name, const char *labels_name,
                              const char *hint, bg_shape_t shape, int64_t classes,
                              bg_dataset_t **out) {
    char images_path[DATASET_PATH_MAX];
    char labels_path[DATASET_PATH_MAX];
    BG_CHECK(find_file(dir, images_name, hint, images_path));
    BG_CHECK(find_file(dir, labels_name, hint, labels_path));
    /* Any byte is a label here: the images' shape, the more basic fit,
     * is checked first, then the labels against the model's classes. */
    bg_dataset_t *ds = NULL;
    BG_CHECK(bg_dataset_load_idx(images_path, labels_path, 256, &ds));
    bg_status_t st = BG_OK;
    const int64_t pixels = bg_shape_numel(ds->shape);
    /* A vector input of as many values (channels=784 height=1 width=1, a
     * model spec's vector) takes each image as its pixels in order, as a
     * flatten layer would give them: an MLP's natural input. */
    if (shape.h == 1 && shape.w == 1 && shape.c == pixels) ds->shape = shape;
    if (ds->shape.c != shape.c || ds->shape.h != shape.h || ds->shape.w != shape.w) {
        /* A model made for timing (examples/conv_balanced.model) has no
         * data of its shape: the way to run it said (a new user's). */
        char fix[256];
        if (bg_shape_numel(shape) == pixels)
            snprintf(fix, sizeof fix,
                     "input channels=%lld height=%lld width=%lld takes them as they are, "
                     "channels=%lld height=1 width=1 as vectors of their values",
                     (long long)ds->shape.c, (long long)ds->shape.h, (long long)ds->shape.w,
                     (long long)pixels);
        else /* a mistyped input line first (a new user's 3x32x32) */
            snprintf(fix, sizeof fix,
                     "an input line of channels=%lld height=%lld width=%lld takes them; --data "
                     "synthetic makes samples of any shape, for timing a model that has no data "
                     "set",
                     (long long)ds->shape.c, (long long)ds->shape.h, (long long)ds->shape.w);
        st = bg_error_set(BG_ERR_INVALID,
                          "%s: images are %lldx%lldx%lld but the model's input is %lldx%lldx%lld "
                          "(%s)",
                          images_path, (long long)ds->shape.c, (long long)ds->shape.h,
                          (long long)ds->shape.w, (long long)shape.c, (long long)shape.h,
                          (long long)shape.w, fix);
        bg_dataset_destroy(ds);
        return st;
    }
    for (int64_t i = 0; i < ds->count && st == BG_OK; i++)
        if (ds->labels[i] >= classes)
            st = bg_error_set(BG_ERR_INVALID,
                              "%s: label %d at index %lld is outside 0..%lld: the model has %lld "
                              "class%s (the outputs of its softmax_cross_entropy)",
                              labels_path, ds->labels[i], (long long)i, (long long)(classes - 1),
                              (long long)classes, classes == 1 ? "" : "es");
    if (st != BG_OK) {
        bg_dataset_destroy(ds);
        return st;
    }
    ds->classes = classes;
    *out = ds;
    return BG_OK;
}

bg_status_t bg_dataset_open(const char *source, bg_shape_t shape, int64_t classes, uint64_t seed,
                            bg_dataset_t **train, bg_dataset_t **test) {
    if (source == NULL || test == NULL)
        return bg_error_set(BG_ERR_INVALID, "bg_dataset_open: NULL source or test");
    if (source[0] == '\0')
        return bg_error_set(BG_ERR_INVALID,
                            "--data: empty (expected fashion-mnist, synthetic or a directory)");
    bg_status_t st = BG_OK;
    bg_dataset_t *train_set = NULL, *test_set = NULL;

    if (strcmp(source, "synthetic") == 0) {
        int64_t train_count, test_count;
        bg_dataset_synthetic_counts(shape, classes, &train_count, &test_count);
        if (train != NULL)
            BG_CHECK_GOTO(bg_dataset_synthetic(shape, classes, train_count, seed, 0, &train_set),
                          st, fail);
        BG_CHECK_GOTO(bg_dataset_synthetic(shape, classes, test_count, seed, 1, &test_set), st,
                      fail);
    } else {
        const char *dir = source;
        const char *hint = "";
        struct stat info;
        if (strcmp(source, "fashion-mnist") == 0) {
            dir = BG_FASHION_MNIST_DIR;
            hint = " (install Debian's dataset-fashion-mnist package)";
        } else {
            /* A misspelt name ("fashion", "Synthetic") is no folder either. */
            const int found = stat(dir, &info) == 0;
            const char *why = found && !S_ISDIR(info.st_mode) ? "not a directory"
                              : !found && (errno == ENOENT || errno == ENOTDIR)
                                  ? "no such directory"
                              : !found ? strerror(errno)
                                       : NULL;
            if (why != NULL)
                return bg_error_set(BG_ERR_IO,
                                    "--data %s: %s; it takes fashion-mnist, synthetic or a "
                                    "directory of IDX files (train-images-idx3-ubyte and the "
                                    "other three)",
                                    source, why);
        }
        if (train != NULL)
            BG_CHECK_GOTO(
                load_split(dir, TRAIN_IMAGES, TRAIN_LABELS, hint, shape, classes, &train_set), st,
                fail);
        BG_CHECK_GOTO(load_split(dir, TEST_IMAGES, TEST_LABELS, hint, shape, classes, &test_set),
                      st, fail);
    }
    if (train != NULL) *train = train_set;
    *test = test_set;
    return BG_OK;
fail:
    bg_dataset_destroy(train_set);
    bg_dataset_destroy(test_set);
    return st;
}

int bg_dataset_files(const char *source, char paths[BG_DATASET_FILES][BG_DATASET_PATH_MAX]) {
    if (source == NULL || strcmp(source, "synthetic") == 0) return 0;
    const char *dir = strcmp(source, "fashion-mnist") == 0 ? BG_FASHION_MNIST_DIR : source;
    const char *const names[] = {TRAIN_IMAGES, TRAIN_LABELS, TEST_IMAGES, TEST_LABELS};
    for (int k = 0; k < 4; k++)
        for (int gz = 0; gz < 2; gz++) {
            const int n = snprintf(paths[2 * k + gz], BG_DATASET_PATH_MAX, "%s%s%s%s", dir,
                                   bg_path_separator(dir), names[k], gz ? ".gz" : "");
            if (n < 0 || n >= BG_DATASET_PATH_MAX) return 0;
        }
    return 8;
}

void bg_dataset_synthetic_counts(bg_shape_t shape, int64_t classes, int64_t *train, int64_t *test) {
    /* The class prototypes, floats, are made beside the samples. */
    const double numel = (double)bg_shape_numel(shape);
    const double most =
        ((double)BG_DATASET_SYNTHETIC_MOST_BYTES - (double)classes * numel * sizeof(float)) / numel;
    *train = BG_DATASET_SYNTHETIC_TRAIN;
    *test = BG_DATASET_SYNTHETIC_TEST;
    if (most >= BG_DATASET_SYNTHETIC_TRAIN + BG_DATASET_SYNTHETIC_TEST) return;
    const double share = most / (BG_DATASET_SYNTHETIC_TRAIN + BG_DATASET_SYNTHETIC_TEST);
    *train = (int64_t)(BG_DATASET_SYNTHETIC_TRAIN * share);
    *test = (int64_t)(BG_DATASET_SYNTHETIC_TEST * share);
    if (*train < 1) *train = 1;
    if (*test < 1) *test = 1;
}

bg_status_t bg_dataset_synthetic(bg_shape_t shape, int64_t classes, int64_t count, uint64_t seed,
                                 uint64_t stream, bg_dataset_t **out) {
    if (out == NULL) return bg_error_set(BG_ERR_INVALID, "bg_dataset_synthetic: NULL out");
    if (stream > 0xff) /* its byte of SYNTHETIC_SAMPLE_STREAM */
        return bg_error_set(BG_ERR_INVALID, "bg_dataset_synthetic: stream %llu past 255",
                            (unsigned long long)stream);
    bg_status_t st = BG_OK;
    bg_dataset_t *ds = NULL;
    float *prototypes = NULL;
    BG_CHECK_GOTO(dataset_alloc(shape, classes, count, 1, &ds), st, done);
    size_t numel = (size_t)bg_shape_numel(shape);
    /* dataset_alloc checked count * numel; the prototypes need classes * numel. */
    if (!dataset_fits(shape, classes)) {
        st = bg_error_set(BG_ERR_INVALID, "dataset: %lld class prototypes do not fit in memory",
                          (long long)classes);
        goto done;
    }
    const uint64_t host = bg_host_memory_bytes();
    if (host > 0 && (double)classes * (double)numel * sizeof(float) > (double)host) {
        st = bg_error_set(BG_ERR_NOMEM,
                          "dataset: %lld class prototypes of %zu values take more than this "
                          "machine's %llu bytes",
                          (long long)classes, numel, (unsigned long long)host);
        goto done;
    }
    prototypes = malloc((size_t)classes * numel * sizeof(float));
    if (prototypes == NULL) {
        st = bg_error_set(BG_ERR_NOMEM,
                          "synthetic data: out of memory for its %lld class prototypes (one "
                          "input each, %.1f GiB as floats)",
                          (long long)classes,
                          (double)classes * (double)numel * sizeof(float) / (1 << 30));
        goto done;
    }

    /* Prototypes come from their own stream so that every `stream` (train,
     * test) draws samples around the same classes. */
    bg_rng_t rng;
    bg_rng_seed(&rng, seed, SYNTHETIC_PROTOTYPE_STREAM);
    for (size_t i = 0; i < (size_t)classes * numel; i++)
        prototypes[i] = (float)bg_rng_uniform(&rng);

    bg_rng_seed(&rng, seed, SYNTHETIC_SAMPLE_STREAM + stream);
    for (int64_t s = 0; s < count; s++) {
        int32_t label = (int32_t)bg_rng_below(&rng, (uint64_t)classes);
        const float *prototype = prototypes + (size_t)label * numel;
        uint8_t *image = ds->pixels + (size_t)s * numel;
        ds->labels[s] = label;
        for (size_t i = 0; i < numel; i++) {
            double x = prototype[i] + SYNTHETIC_NOISE * bg_rng_normal(&rng);
            x = x < 0.0 ? 0.0 : x > 1.0 ? 1.0 : x;
            image[i] = (uint8_t)(x * 255.0 + 0.5);
        }
    }
    *out = ds;
    ds = NULL;
done:
    free(prototypes);
    bg_dataset_destroy(ds);
    return st;
}

void bg_dataset_destroy(bg_dataset_t *ds) {
    if (ds == NULL) return;
    free(ds->pixels);
    free(ds->labels);
    free(ds);
}

void bg_dataset_shuffle(int64_t count, int64_t *order, bg_rng_t *rng) {
    for (int64_t i = 0; i < count; i++) order[i] = i;
    for (int64_t i = count - 1; i > 0; i--) {
        int64_t j = (int64_t)bg_rng_below(rng, (uint64_t)i + 1);
        int64_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

/* One sample's pixels as values x / 255 (the division, not a product with
 * 1/255, which would round some of them differently). */
static void to_values(const uint8_t *pixels, size_t numel, float *values) {
    for (size_t i = 0; i < numel; i++) values[i] = (float)pixels[i] / 255.0f;
}

void bg_dataset_gather(const bg_dataset_t *ds, const int64_t *order, int64_t n, float *images,
                       int32_t *labels) {
    size_t numel = (size_t)bg_shape_numel(ds->shape);
    for (int64_t k = 0; k < n; k++) {
        to_values(ds->pixels + (size_t)order[k] * numel, numel, images + (size_t)k * numel);
        labels[k] = ds->labels[order[k]];
    }
}

void bg_dataset_images(const bg_dataset_t *ds, int64_t first, int64_t n, float *images) {
    size_t numel = (size_t)bg_shape_numel(ds->shape);
    to_values(ds->pixels + (size_t)first * numel, (size_t)n * numel, images);
}

float *bg_dataset_all_images(const bg_dataset_t *ds) {
    float *images = malloc((size_t)ds->count * (size_t)bg_shape_numel(ds->shape) * sizeof(float));
    if (images != NULL) bg_dataset_images(ds, 0, ds->count, images);
    return images;
}

uint32_t bg_dataset_crc32(const bg_dataset_t *ds) {
    uint32_t crc = bg_crc32_update(bg_crc32_start(), ds->pixels,
                                   (uint64_t)ds->count * (uint64_t)bg_shape_numel(ds->shape));
    /* The labels as little-endian int32, whatever the host's order. */
    uint8_t chunk[4096];
    for (int64_t at = 0; at < ds->count;) {
        size_t n = 0;
        for (; n + 4 <= sizeof chunk && at < ds->count; n += 4, at++) {
            const uint32_t v = (uint32_t)ds->labels[at];
            chunk[n] = (uint8_t)v;
            chunk[n + 1] = (uint8_t)(v >> 8);
            chunk[n + 2] = (uint8_t)(v >> 16);
            chunk[n + 3] = (uint8_t)(v >> 24);
        }
        crc = bg_crc32_update(crc, chunk, n);
    }
    return crc;
}
