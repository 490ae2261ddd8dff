/* Device strings (--devices): which devices the stages run on.
 *
 *   cpu          one CPU device
 *   cpu:N        N CPU devices, one worker thread each, bound to cores
 *                0..N-1 (wrapping around when N exceeds the cores)
 *   cuda:0,cuda:1   GPUs by index, each once; cuda:0x4 four virtual devices
 *                sharing GPU 0
 *   auto         the GPUs when this build has a CUDA backend and CUDA sees
 *                some, else one CPU device per core (at most
 *                BG_MAX_DEVICES) */
#ifndef BG_DEVICES_H
#define BG_DEVICES_H

#include <stddef.h>
#include <stdio.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { BG_MAX_DEVICES = 256 };

/* The largest GPU number --devices takes (cuda:255), and a topology file's
 * GPUs (cudaN) with it. */
enum { BG_DEVICES_MAX_CUDA = 255 };

typedef enum bg_device_kind { BG_DEVICE_CPU, BG_DEVICE_CUDA } bg_device_kind_t;

typedef struct bg_device {
    bg_device_kind_t kind;
    int physical;  /* the core (CPU) or GPU index it runs on */
    char name[24]; /* "cpu:0", "cuda:0", "cuda:0/1" for the second virtual device of GPU 0 */
} bg_device_t;

typedef struct bg_device_list {
    int count;
    bg_device_t devices[BG_MAX_DEVICES];
} bg_device_list_t;

/* Parses a device string for a machine with `cores` cores. Malformed strings
 * are BG_ERR_INVALID with a message quoting the bad part. */
bg_status_t bg_device_list_parse(const char *text, int cores, bg_device_list_t *out);

/* The same for a machine with `gpus` GPUs (what `auto` takes), such as one
 * an hwloc XML file describes; bg_device_list_parse asks CUDA. */
bg_status_t bg_device_list_parse_on(const char *text, int cores, int gpus, bg_device_list_t *out);

/* How many GPUs CUDA sees, asked only when `text` names GPUs ("auto", or
 * any "cuda"); 0 otherwise, without loading the CUDA backend, which a run on
 * CPU devices never needs (lib/cuda/module.h). */
int bg_device_text_gpus(const char *text);

/* BG_OK when this machine has `d` (a CPU device always); else
 * BG_ERR_UNSUPPORTED, "NAME: " and why there is no CUDA backend
 * (bg_cuda_absent_reason) or "CUDA sees N GPUs on this machine", then
 * " (HINT)" when a hint is given. */
bg_status_t bg_device_check_present(const bg_device_t *d, const char *hint);

/* Prints the devices' names, "cpu:0, cpu:1" (no newline). */
void bg_device_list_print(const bg_device_list_t *list, FILE *out);

/* The list the other way round, in place. */
void bg_device_list_reverse(bg_device_list_t *list);

/* The devices for a message: "cpu:0" or "cpu:0, cpu:1", and past four
 * "cpu:0, cpu:1, ..., cpu:7 (8 devices)", into buf. Returns buf. */
const char *bg_device_list_words(const bg_device_list_t *list, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* BG_DEVICES_H */
