/* Labelled image datasets held in host memory: Fashion-MNIST (or any
 * MNIST-format directory) read from IDX files, or synthetic data for
 * benchmarks and tests. Pixels are kept as the bytes the files hold (a
 * quarter of the memory floats would take) and handed out as floats in
 * [0, 1], x / 255, as in the original Keras example. */
#ifndef BG_DATASET_H
#define BG_DATASET_H

#include <stdint.h>

#include "model_spec.h"
#include "rng.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Where Debian's dataset-fashion-mnist package installs the data. */
#define BG_FASHION_MNIST_DIR "/usr/share/datasets/fashion-mnist"

typedef struct bg_dataset {
    int64_t count;
    bg_shape_t shape; /* per-sample (channels, height, width) */
    int64_t classes;
    uint8_t *pixels; /* count * c * h * w bytes, NCHW; a pixel x is the value x / 255 */
    int32_t *labels; /* count values in [0, classes) */
} bg_dataset_t;

/* Builds a dataset from an IDX image file (3 dims: count, h, w; one channel)
 * and an IDX label file (1 dim: count). Rejects, naming the file: counts that
 * differ, labels >= classes, a wrong number of dimensions (BG_ERR_PARSE). */
bg_status_t bg_dataset_load_idx(const char *images_path, const char *labels_path, int64_t classes,
                                bg_dataset_t **out);

/* Opens the train and test sets named by `source`:
 *   "fashion-mnist"  BG_FASHION_MNIST_DIR
 *   "synthetic"      generated: 8192 train and 2048 test samples of shape
 *                    `shape`, fewer where those would pass 1 GiB
 *                    (bg_dataset_synthetic_counts), drawn around one
 *                    random prototype per class,
 *                    so a model can learn them, rounded to bytes like an
 *                    image file's; deterministic in `seed`
 *   anything else    a directory holding train-images-idx3-ubyte,
 *                    train-labels-idx1-ubyte, t10k-images-idx3-ubyte and
 *                    t10k-labels-idx1-ubyte, each optionally ending in .gz
 * With `train` NULL only the test split is made or read (an evaluation).
 * The images must have the model's input `shape`; a mismatch is
 * BG_ERR_INVALID naming the file and both shapes. A missing file is BG_ERR_IO
 * naming every path tried (and, for fashion-mnist, the Debian package). */
bg_status_t bg_dataset_open(const char *source, bg_shape_t shape, int64_t classes, uint64_t seed,
                            bg_dataset_t **train, bg_dataset_t **test);

enum { BG_DATASET_FILES = 8, BG_DATASET_PATH_MAX = 4096 };

/* The files bg_dataset_open may read for `source`: each of the four IDX
 * names in its directory, plain (paths[2k]) and gzip'd (paths[2k + 1]), so
 * that a caller can keep its outputs off them. Returns how many were
 * written: BG_DATASET_FILES, or 0 for "synthetic" (and for a directory
 * whose paths would be too long, which bg_dataset_open refuses). */
int bg_dataset_files(const char *source, char paths[BG_DATASET_FILES][BG_DATASET_PATH_MAX]);

/* --data synthetic's usual sizes, and the most bytes its samples and
 * class prototypes take (bg_dataset_synthetic_counts). */
enum {
    BG_DATASET_SYNTHETIC_TRAIN = 8192,
    BG_DATASET_SYNTHETIC_TEST = 2048,
    BG_DATASET_SYNTHETIC_MOST_BYTES = 1 << 30,
};

/* How many samples --data synthetic makes of `shape` for `classes`: 8,192
 * to train on and 2,048 to test, a byte a value, or where those and the
 * class prototypes made beside them (floats) would pass 1 GiB as many in
 * the same proportion as fit in it (at least one each). */
void bg_dataset_synthetic_counts(bg_shape_t shape, int64_t classes, int64_t *train, int64_t *test);

/* Synthetic dataset of `count` samples (see bg_dataset_open). `seed` fixes the
 * class prototypes; `stream` (0 to 255) selects which samples are drawn
 * around them, so a train and a test set share prototypes but not samples. */
bg_status_t bg_dataset_synthetic(bg_shape_t shape, int64_t classes, int64_t count, uint64_t seed,
                                 uint64_t stream, bg_dataset_t **out);

/* NULL is a no-op. */
void bg_dataset_destroy(bg_dataset_t *ds);

/* Writes a uniformly random permutation of 0..count-1 into order (Fisher-Yates). */
void bg_dataset_shuffle(int64_t count, int64_t *order, bg_rng_t *rng);

/* Copies samples order[0..n) into images (n, c, h, w; values x / 255) and
 * labels (n). */
void bg_dataset_gather(const bg_dataset_t *ds, const int64_t *order, int64_t n, float *images,
                       int32_t *labels);

/* CRC-32 of the set's pixels (as stored, a byte each) and then its labels
 * (little-endian int32): what a checkpoint records of the data its run
 * trained on, so that a resumed run can tell other data of the same size
 * (zlib's crc32 took 18 ms over 47 MB, Fashion-MNIST's training pixels,
 * on this project's 2-core CI machine: python3 -c 'zlib.crc32(...)'). */
uint32_t bg_dataset_crc32(const bg_dataset_t *ds);

/* Writes the images of samples first..first+n-1 into `images` (n, c, h, w;
 * values x / 255). */
void bg_dataset_images(const bg_dataset_t *ds, int64_t first, int64_t n, float *images);

/* Every image of `ds` as values x / 255, in a new array the caller frees;
 * NULL when out of memory. For tests and benchmarks that step through a
 * small set as it lies. */
float *bg_dataset_all_images(const bg_dataset_t *ds);

#ifdef __cplusplus
}
#endif

#endif /* BG_DATASET_H */
