/* Latency of a hand-off between two stage threads through the executor's
 * host channels, when the receiver has been waiting only briefly: two
 * threads, each bound to its own core, bounce one message of COUNT floats
 * back and forth REPS times (a send, then a receive of the answer). Each
 * receiver starts waiting as soon as it has sent, so every wait lasts one
 * hand-off: the regime of a pipeline whose ops take microseconds (stages
 * on a GPU, whose threads only enqueue work). Prints the best and the
 * median of half a round trip.
 *
 *   bench_handoff [COUNT] [REPS]
 *
 * Not a test: compare figures on a quiet machine, never assert on them. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench_timing.h"
#include "channel.h"
#include "cpu/backend_cpu.h"
#include "topology.h"

typedef struct end {
    bg_channel_t *out, *in;
    bg_backend_t *be;
    bg_topology_t *topology; /* or NULL: unbound */
    int core, reps, first;
    float *buffer;
    size_t bytes;
    double *half_trips; /* the first end's: one per round */
    bg_status_t status;
    char message[256]; /* its thread's error message, on failure */
} end_t;

/* The first end sends and waits for the answer; the other answers. */
static bg_status_t bounce(end_t *e) {
    size_t got;
    for (int r = 0; r < e->reps; r++) {
        const double start = bg_monotonic_seconds();
        if (e->first) BG_CHECK(bg_channel_send(e->out, e->be, r, e->buffer, e->bytes, NULL, NULL));
        BG_CHECK(bg_channel_recv(e->in, e->be, r, e->buffer, e->bytes, &got, NULL));
        if (!e->first) BG_CHECK(bg_channel_send(e->out, e->be, r, e->buffer, e->bytes, NULL, NULL));
        if (e->first) e->half_trips[r] = 0.5 * (bg_monotonic_seconds() - start);
    }
    return BG_OK;
}

static void *end_main(void *arg) {
    end_t *e = arg;
    if (e->topology != NULL && bg_topology_bind_thread(e->topology, e->core) != BG_OK)
        bg_error_clear();
    e->status = bounce(e);
    if (e->status != BG_OK) { /* the other end may be waiting for this one */
        snprintf(e->message, sizeof e->message, "%s", bg_error_message());
        bg_channel_abort(e->out);
        bg_channel_abort(e->in);
    }
    return NULL;
}

int main(int argc, char **argv) {
    long long count = 1024;
    int reps = 20000;
    if (bench_count_reps(argc, argv, "bench_handoff", &count, &reps) != 0) return 2;
    const size_t bytes = sizeof(float) * (size_t)count;
    bg_topology_t *topology = NULL;
    if (bg_topology_create(NULL, &topology) != BG_OK || bg_topology_core_count(topology) < 2) {
        bg_error_clear();
        bg_topology_destroy(topology);
        topology = NULL; /* unbound: the figures then include the scheduler's moves */
    }
    bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    bg_backend_t *be[2] = {NULL, NULL}; /* one per thread, as backends are driven */
    bg_channel_t *there = NULL, *back = NULL;
    /* As the pipeline makes them, one core per thread (BG_CHANNEL_POLL_S);
     * BENCH_POLL_US sets another poll, 0 none. */
    const char *poll_us = getenv("BENCH_POLL_US");
    bg_channel_config_t cc = {.slot_bytes = bytes,
                              .capacity = 2,
                              .name = "bench channel",
                              .poll_s = poll_us != NULL ? 1e-6 * atof(poll_us) : BG_CHANNEL_POLL_S};
    float *buffers[2] = {calloc((size_t)count, sizeof(float)),
                         calloc((size_t)count, sizeof(float))};
    double *half_trips = calloc((size_t)reps, sizeof *half_trips);
    bg_status_t st = buffers[0] && buffers[1] && half_trips ? BG_OK : BG_ERR_NOMEM;
    int reported = 0; /* a thread's failure was printed */
    for (int i = 0; i < 2 && st == BG_OK; i++) st = bg_backend_cpu_create(&cfg, &be[i]);
    if (st == BG_OK) st = bg_channel_create(&cc, &there);
    if (st == BG_OK) st = bg_channel_create(&cc, &back);
    if (st == BG_OK) {
        end_t ends[2] = {{.out = there,
                          .in = back,
                          .be = be[0],
                          .topology = topology,
                          .core = 0,
                          .reps = reps,
                          .first = 1,
                          .buffer = buffers[0],
                          .bytes = bytes,
                          .half_trips = half_trips},
                         {.out = back,
                          .in = there,
                          .be = be[1],
                          .topology = topology,
                          .core = 1,
                          .reps = reps,
                          .buffer = buffers[1],
                          .bytes = bytes}};
        pthread_t other;
        if (pthread_create(&other, NULL, end_main, &ends[1]) != 0) {
            st = BG_ERR_INTERNAL;
        } else {
            end_main(&ends[0]);
            pthread_join(other, NULL);
            for (int i = 0; i < 2; i++)
                if (ends[i].status != BG_OK) {
                    fprintf(stderr, "bench_handoff: thread %d: %s\n", i, ends[i].message);
                    st = ends[i].status;
                    reported = 1;
                }
        }
    }
    if (st == BG_OK) {
        qsort(half_trips, (size_t)reps, sizeof *half_trips, compare_doubles);
        printf("hand-off of %lld floats through a host channel polling %.0f us, %d round trips%s: "
               "best %.2f us, median %.2f us, 90th percentile %.2f us\n",
               count, 1e6 * cc.poll_s, reps,
               topology != NULL ? " (threads on cores 0 and 1)" : " (unbound)", 1e6 * half_trips[0],
               1e6 * half_trips[reps / 2], 1e6 * half_trips[(size_t)reps * 9 / 10]);
    } else if (!reported) {
        fprintf(stderr, "bench_handoff: %s\n", bg_error_message());
    }
    bg_channel_destroy(there);
    bg_channel_destroy(back);
    for (int i = 0; i < 2; i++)
        if (be[i] != NULL) be[i]->ops->destroy(be[i]);
    bg_topology_destroy(topology);
    free(buffers[0]);
    free(buffers[1]);
    free(half_trips);
    return st == BG_OK ? 0 : 1;
}
