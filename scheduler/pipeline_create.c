/* Building and tearing down the executor (scheduler/pipeline.h): the
 * split into stages, the backends, schedules, stages and channels of a
 * placement, the worker threads; and the split's checks. Running jobs is
 * scheduler/pipeline.c. */
#include "pipeline.h"

#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "alloc.h"
#include "cpu/backend_cpu.h"
#include "monotonic.h"
#include "pipeline_impl.h"

bg_status_t bg_pipeline_balance_split(const bg_model_spec_t *spec, int stages, int *first) {
    const int n = spec->num_layers;
    if (stages < 1 || stages > n)
        return bg_error_set(BG_ERR_INVALID, "cannot cut %d layers into %d stages", n, stages);
    /* Cost of a layer: forward plus backward, about 3x the forward for layers
     * with weights (dX and dW) and 2x for the others, plus 1 (so that a layer
     * of no FLOPs, a flatten, still weighs something). In doubles: three
     * times a model's FLOPs may pass 64-bit integers (its FLOPs do not). */
    double *prefix = bg_calloc((size_t)n + 1, sizeof *prefix);
    double *best = bg_malloc(sizeof(double) * (size_t)(n + 1) * (size_t)(stages + 1));
    int *cut = bg_malloc(sizeof(int) * (size_t)(n + 1) * (size_t)(stages + 1));
    if (prefix == NULL || best == NULL || cut == NULL) {
        free(prefix);
        free(best);
        free(cut);
        return bg_error_set(BG_ERR_NOMEM, "out of memory balancing stages");
    }
    for (int i = 0; i < n; i++)
        prefix[i + 1] =
            prefix[i] + (double)spec->layers[i].flops * (spec->layers[i].params ? 3 : 2) + 1;
#define BEST(k, j) best[(size_t)(k) * (size_t)(n + 1) + (size_t)(j)]
#define CUT(k, j)  cut[(size_t)(k) * (size_t)(n + 1) + (size_t)(j)]
    /* BEST(k, j): the lightest slowest stage when layers [0, j) form k stages. */
    for (int j = 1; j <= n; j++) BEST(1, j) = prefix[j];
    for (int k = 2; k <= stages; k++) {
        for (int j = k; j <= n; j++) {
            BEST(k, j) = INFINITY;
            for (int i = k - 1; i < j; i++) {
                /* A stage starts outside every residual block. */
                if (BEST(k - 1, i) == INFINITY || !bg_model_spec_can_start(spec, i)) continue;
                const double last = prefix[j] - prefix[i];
                const double worst = BEST(k - 1, i) > last ? BEST(k - 1, i) : last;
                if (worst < BEST(k, j)) {
                    BEST(k, j) = worst;
                    CUT(k, j) = i;
                }
            }
        }
    }
    if (BEST(stages, n) == INFINITY) {
        free(prefix);
        free(best);
        free(cut);
        return bg_model_spec_check_stage_count(spec, stages, "");
    }
    int j = n;
    for (int k = stages; k >= 2; k--) {
        j = CUT(k, j);
        first[k - 1] = j;
    }
    first[0] = 0;
#undef BEST
#undef CUT
    free(prefix);
    free(best);
    free(cut);
    return BG_OK;
}

static bg_status_t create_backends(bg_pipeline_t *p) {
    for (int d = 0; d < p->devices; d++) {
        const bg_device_t *dev = &p->cfg.devices->devices[d];
        if (dev->kind == BG_DEVICE_CUDA) {
            BG_CHECK(bg_device_check_present(dev, "use --devices cpu:N"));
            /* Channels between two CUDA stages copy on the receiver's copy
             * stream (scheduler/channel.h); with a CPU stage, through host
             * memory. */
            bg_cuda_config_t cuda = BG_CUDA_CONFIG_INIT;
            cuda.device = dev->physical;
            cuda.dtype = p->cfg.dtype;
            cuda.allow_tf32 = p->cfg.allow_tf32;
            cuda.conv_workspace_limit = p->cfg.conv_workspace_limit;
            BG_CHECK(bg_backend_cuda_create(&cuda, &p->backends[d]));
            continue;
        }
        bg_cpu_config_t cpu = BG_CPU_CONFIG_INIT;
        cpu.dtype = p->cfg.dtype;
        cpu.index = d;
        BG_CHECK(bg_backend_cpu_create(&cpu, &p->backends[d]));
    }
    return BG_OK;
}

static bg_status_t create_schedules(bg_pipeline_t *p) {
    bg_schedule_config_t sc = BG_SCHEDULE_CONFIG_INIT;
    sc.kind = p->cfg.schedule;
    sc.devices = p->devices;
    sc.chunks = p->chunks;
    sc.microbatches = p->microbatches;
    BG_CHECK(bg_schedule_create(&sc, &p->train));
    sc.forward_only = 1;
    BG_CHECK(bg_schedule_create(&sc, &p->eval));
    for (int s = 0; s < p->stages; s++) {
        /* The schedule is valid and s in range: -1 is out of memory. */
        p->slots[s] = bg_schedule_stash_slots(p->train, s);
        if (p->slots[s] < 0) return bg_error_prefix(BG_ERR_NOMEM, "pipeline: ");
        /* An evaluation keeps nothing for a backward: its forwards take
         * turns in one slot. */
        if (p->slots[s] < 1 || p->cfg.forward_only) p->slots[s] = 1;
        p->last_gradient_mb[s] = bg_schedule_last_gradient_microbatch(p->train, s);
        if (p->last_gradient_mb[s] < 0)
            return bg_error_set(BG_ERR_INTERNAL, "pipeline: stage %d computes no gradient", s);
    }
    return BG_OK;
}

static bg_status_t create_stages(bg_pipeline_t *p) {
    for (int d = 0; d < p->devices; d++) p->arenas[d] = bg_arena_init(p->backends[d]);
    for (int s = 0; s < p->stages; s++) {
        p->output_records[s] = bg_calloc((size_t)p->slots[s], sizeof *p->output_records[s]);
        p->output_sent[s] = bg_calloc((size_t)p->slots[s], sizeof *p->output_sent[s]);
        if (p->output_records[s] == NULL || p->output_sent[s] == NULL)
            return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory");
        bg_stage_config_t sc = BG_STAGE_CONFIG_INIT;
        sc.spec = p->cfg.spec;
        sc.first_layer = p->first[s];
        sc.last_layer = p->first[s + 1];
        sc.backend = stage_backend(p, s);
        sc.max_batch = p->max_micro;
        sc.seed = p->cfg.seed;
        sc.optimizer = p->cfg.optimizer;
        sc.stash_slots = p->slots[s];
        sc.split_backward = p->train->split_backward;
        sc.recompute = p->cfg.recompute;
        sc.forward_only = p->cfg.forward_only;
        sc.arena = &p->arenas[s % p->devices];
        BG_CHECK(bg_stage_create(&sc, &p->stage[s]));
    }
    return BG_OK;
}

/* Makes each device's one allocation, for its stages and the GPU slots of
 * the channels into it, then binds the stages to their buffers. */
static bg_status_t commit_arenas(bg_pipeline_t *p) {
    for (int d = 0; d < p->devices; d++) {
        bg_arena_t *arena = &p->arenas[d];
        const bg_status_t st = bg_arena_commit(arena);
        if (st == BG_OK) continue;
        char parts[512];
        size_t used = 0, staged = 0;
        parts[0] = '\0';
        for (int s = d; s < p->stages; s += p->devices) {
            const size_t bytes = bg_stage_memory(p->stage[s]).arena;
            staged += bytes;
            if (used < sizeof parts)
                used +=
                    (size_t)snprintf(parts + used, sizeof parts - used, "%slayers %d..%d: %zu",
                                     s == d ? "" : ", ", p->first[s], p->first[s + 1] - 1, bytes);
        }
        /* On a GPU the slots of the channels into it share the allocation;
           a CPU device's rings are allocated apart, so its figure is less
           than the peak plan gives (whose 'other' column counts them). */
        const bg_device_t *device = &p->cfg.devices->devices[d];
        char slots[96] = "";
        if (arena->bytes > staged)
            snprintf(slots, sizeof slots, " and the slots of the channels into it (%zu)",
                     arena->bytes - staged);
        else if (device->kind == BG_DEVICE_CPU)
            snprintf(slots, sizeof slots, ", not its channel rings (allocated apart on CPUs)");
        /* The backend's message names the device too. */
        bg_error_drop_name(device->name);
        return bg_error_prefix(
            st, "%s: one allocation of %zu bytes (%.2f MiB) for its stages (%s)%s: ", device->name,
            arena->bytes, (double)arena->bytes / (1024.0 * 1024.0), parts, slots);
    }
    for (int s = 0; s < p->stages; s++) {
        BG_CHECK(bg_stage_bind(p->stage[s]));
        /* Slots whose outputs share one buffer (a layer that aliases its
         * input) share one record of what was sent from it. */
        for (int k = 0; k < p->slots[s]; k++) {
            const void *out = bg_stage_slot_output(p->stage[s], k);
            p->output_sent[s][k] = &p->output_records[s][k];
            for (int j = 0; j < k; j++)
                if (bg_stage_slot_output(p->stage[s], j) == out) {
                    p->output_sent[s][k] = &p->output_records[s][j];
                    break;
                }
        }
    }
    return BG_OK;
}

/* The NUMA node near device d's GPU, for host staging buffers that GPU
 * reads; -1 for a CPU device or where the topology does not say. */
static int staging_node(const bg_pipeline_t *p, int d) {
    const bg_device_t *dev = &p->cfg.devices->devices[d];
    if (p->cfg.topology == NULL || dev->kind != BG_DEVICE_CUDA) return -1;
    int gpu = bg_pipeline_topology_gpu(p->cfg.topology, dev);
    return gpu >= 0 ? bg_topology_gpu(p->cfg.topology, gpu).numa : -1;
}

/* How long the waits poll before they sleep (cfg.poll_s, where it is not
 * < 0): the channels' and the device threads' BG_CHANNEL_POLL_S for stages
 * on GPUs, whose threads only enqueue ops of microseconds, where every
 * device's thread can have a core of its own (a waiting thread's core is
 * then idle; else polling would take the core from the thread it waits
 * for), and the caller's BG_PIPELINE_DONE_POLL_S where it can have one
 * more. 0 on CPU devices: their ops take milliseconds, so a wait rarely
 * ends within the poll, and sleeping keeps the hand-off the simulator
 * charges (the profile's, of a thread asleep) the executor's. */
static void choose_polls(bg_pipeline_t *p) {
    p->poll_s = p->done_poll_s = 0;
    if (p->cfg.poll_s >= 0) {
        p->poll_s = p->done_poll_s = p->cfg.poll_s;
        return;
    }
    for (int d = 0; d < p->devices; d++)
        if (!bg_backend_is_cuda(p->backends[d])) return;
    cpu_set_t usable;
    const long cores = sched_getaffinity(0, sizeof usable, &usable) == 0
                           ? CPU_COUNT(&usable)
                           : sysconf(_SC_NPROCESSORS_ONLN);
    if (p->devices <= cores) p->poll_s = BG_CHANNEL_POLL_S;
    if (p->devices < cores) p->done_poll_s = BG_PIPELINE_DONE_POLL_S;
}

static bg_status_t create_channels(bg_pipeline_t *p) {
    const double poll_s = p->poll_s;
    for (int s = 0; s + 1 < p->stages; s++) {
        char name[64];
        bg_channel_config_t cc = {
            .slot_bytes = stage_bytes(p, p->first[s + 1], p->max_micro),
            .capacity = bg_schedule_ring_slots(p->devices, s, s + 1),
            .name = name,
            .timeout_s = p->cfg.stall_timeout_s,
            .poll_s = poll_s,
            .topology = p->cfg.topology,
            .force_staging = p->cfg.stage_through_host,
        };
        bg_backend_t *here = p->backends[s % p->devices], *next = p->backends[(s + 1) % p->devices];
        snprintf(name, sizeof name, "activations stage %d -> %d", s, s + 1);
        cc.sender = here;
        cc.receiver = next;
        cc.arena = &p->arenas[(s + 1) % p->devices];
        cc.staging_node = staging_node(p, (s + 1) % p->devices);
        cc.copy_lane = BG_CUDA_LANE_ACTIVATIONS;
        BG_CHECK(bg_channel_create(&cc, &p->forward[s]));
        if (p->cfg.forward_only) continue;
        snprintf(name, sizeof name, "gradients stage %d -> %d", s + 1, s);
        cc.sender = next;
        cc.receiver = here;
        cc.arena = &p->arenas[s % p->devices];
        cc.staging_node = staging_node(p, s % p->devices);
        cc.copy_lane = BG_CUDA_LANE_GRADIENTS;
        BG_CHECK(bg_channel_create(&cc, &p->backward[s]));
    }
    return BG_OK;
}

/* Room for the NaN checks of a step: per stage of the device, a forward
 * output (or the loss) and an input gradient per micro-batch, and its
 * gradients. */
static bg_status_t allocate_checks(bg_pipeline_t *p) {
    for (int d = 0; d < p->devices; d++) {
        device_worker_t *w = &p->workers[d];
        for (int s = d; s < p->stages; s += p->devices)
            w->check_capacity += 2 * p->microbatches + 1;
        w->checks = bg_calloc((size_t)w->check_capacity, sizeof *w->checks);
        if (w->checks == NULL) return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory");
    }
    return BG_OK;
}

/* The two sets of pinned batch copies of pin_batch, for stages on GPUs. */
static bg_status_t allocate_pinned_batch(bg_pipeline_t *p) {
    bg_backend_t *first = stage_backend(p, 0), *last = stage_backend(p, p->stages - 1);
    for (int set = 0; set < 2; set++) {
        if (bg_backend_is_cuda(first))
            BG_CHECK(first->ops->host_alloc(
                first, sizeof(float) * (size_t)(p->cfg.batch * bg_shape_numel(p->cfg.spec->input)),
                (void **)&p->pinned_images[set]));
        if (bg_backend_is_cuda(last))
            BG_CHECK(last->ops->host_alloc(last, sizeof(int32_t) * (size_t)p->cfg.batch,
                                           (void **)&p->pinned_labels[set]));
    }
    return BG_OK;
}

static bg_status_t start_workers(bg_pipeline_t *p) {
    for (int d = 0; d < p->devices; d++) {
        device_worker_t *w = &p->workers[d];
        w->p = p;
        w->device = d;
        const int error = pthread_create(&w->thread, NULL, bg_pipeline_device_main, w);
        if (error != 0) /* EAGAIN: ulimit -u, or memory for its stack */
            return bg_error_set(BG_ERR_NOMEM,
                                "cannot start the thread of device %s: %s (%d devices' threads "
                                "asked for; ulimit -u and the memory for their stacks bound them)",
                                p->cfg.devices->devices[d].name, strerror(error), p->devices);
        w->started = 1;
    }
    return BG_OK;
}

static bg_status_t allocate(bg_pipeline_t *p) {
    p->backends = bg_calloc((size_t)p->devices, sizeof *p->backends);
    p->arenas = bg_calloc((size_t)p->devices, sizeof *p->arenas);
    p->stage = bg_calloc((size_t)p->stages, sizeof *p->stage);
    p->first = bg_calloc((size_t)p->stages + 1, sizeof *p->first);
    p->slots = bg_calloc((size_t)p->stages, sizeof *p->slots);
    p->last_gradient_mb = bg_calloc((size_t)p->stages, sizeof *p->last_gradient_mb);
    p->forward = bg_calloc((size_t)p->stages, sizeof *p->forward);
    p->backward = bg_calloc((size_t)p->stages, sizeof *p->backward);
    p->output_sent = bg_calloc((size_t)p->stages, sizeof *p->output_sent);
    p->output_records = bg_calloc((size_t)p->stages, sizeof *p->output_records);
    p->grad_sent = bg_calloc((size_t)p->stages, sizeof *p->grad_sent);
    p->workers = bg_calloc((size_t)p->devices, sizeof *p->workers);
    p->micro_offset = bg_calloc((size_t)p->microbatches, sizeof *p->micro_offset);
    p->micro_size = bg_calloc((size_t)p->microbatches, sizeof *p->micro_size);
    p->layer_squares = bg_calloc((size_t)p->cfg.spec->num_layers, sizeof *p->layer_squares);
    if (!p->layer_squares || !p->backends || !p->arenas || !p->stage || !p->first || !p->slots ||
        !p->last_gradient_mb || !p->forward || !p->backward || !p->output_sent ||
        !p->output_records || !p->grad_sent || !p->workers || !p->micro_offset || !p->micro_size)
        return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory");
    return BG_OK;
}

bg_status_t bg_pipeline_create(const bg_pipeline_config_t *cfg, bg_pipeline_t **out) {
    if (cfg->spec == NULL || cfg->devices == NULL || cfg->devices->count < 1)
        return bg_error_set(BG_ERR_INVALID, "pipeline: no model or no devices");
    if (cfg->chunks < 1 || cfg->microbatches < 1 || cfg->batch < 1)
        return bg_error_set(BG_ERR_INVALID,
                            "pipeline: chunks, micro-batches and batch must be >= 1");
    if (cfg->microbatches > cfg->batch)
        return bg_error_set(
            BG_ERR_INVALID,
            "%d micro-batches of a batch of %lld samples would leave some micro-batches "
            "empty (at most %lld)",
            cfg->microbatches, (long long)cfg->batch, (long long)cfg->batch);
    /* A wait that polled longer would outlast what it waits for, and the
     * stall timeout's first check comes after the poll. */
    if (isnan(cfg->poll_s) || cfg->poll_s > BG_PIPELINE_POLL_MAX_S)
        return bg_error_set(BG_ERR_INVALID,
                            "pipeline: waits poll 0 to %g s before they sleep (< 0 chooses); "
                            "asked for %g s",
                            BG_PIPELINE_POLL_MAX_S, cfg->poll_s);
    /* Past the bound (or not a number) the waits' deadlines would not be
     * times (until 2026-12-06 a library caller's infinite timeout made a
     * wait spin holding its lock, and 1e300 a deadline in the past). */
    if (!(cfg->stall_timeout_s >= 0 && cfg->stall_timeout_s <= BG_PIPELINE_STALL_MAX_S))
        return bg_error_set(BG_ERR_INVALID,
                            "pipeline: the stall timeout is 0 (none) to %g s; asked for %g s",
                            BG_PIPELINE_STALL_MAX_S, cfg->stall_timeout_s);
    /* Counted in 64 bits: devices x chunks is not wrapped into range. */
    const int64_t stage_count = (int64_t)cfg->devices->count * cfg->chunks;
    if (stage_count > BG_MAX_STAGES)
        return bg_error_set(BG_ERR_INVALID, "%lld stages (%d devices x %d chunks); at most %d",
                            (long long)stage_count, cfg->devices->count, cfg->chunks,
                            BG_MAX_STAGES);
    const int stages = (int)stage_count;
    bg_pipeline_t *p = bg_calloc(1, sizeof *p);
    if (p == NULL) return bg_error_set(BG_ERR_NOMEM, "pipeline: out of memory");
    p->cfg = *cfg;
    p->devices = cfg->devices->count;
    p->chunks = cfg->chunks;
    p->stages = stages;
    p->microbatches = cfg->microbatches;
    p->max_micro = (cfg->batch + cfg->microbatches - 1) / cfg->microbatches;
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->work, NULL);
    pthread_cond_init(&p->done, NULL);
    bg_cond_init_monotonic(&p->barrier); /* timed: step_barrier */
    atomic_init(&p->generation, 0);
    atomic_init(&p->remaining, 0);
    bg_status_t st;
    BG_CHECK_GOTO(allocate(p), st, fail);
    if (stages > cfg->spec->num_layers) {
        st = bg_error_set(BG_ERR_INVALID,
                          "%d stages (%d devices x %d chunks) but the model has only %d layer%s",
                          stages, p->devices, p->chunks, cfg->spec->num_layers,
                          cfg->spec->num_layers == 1 ? "" : "s");
        goto fail;
    }
    if (cfg->split != NULL)
        BG_CHECK_GOTO(bg_model_spec_check_split(cfg->spec, stages, cfg->split, p->first), st, fail);
    else
        BG_CHECK_GOTO(bg_pipeline_balance_split(cfg->spec, stages, p->first), st, fail);
    p->first[stages] = cfg->spec->num_layers;
    BG_CHECK_GOTO(create_schedules(p), st, fail);
    BG_CHECK_GOTO(create_backends(p), st, fail);
    BG_CHECK_GOTO(create_stages(p), st, fail);
    choose_polls(p);
    BG_CHECK_GOTO(create_channels(p), st, fail);
    BG_CHECK_GOTO(commit_arenas(p), st, fail);
    BG_CHECK_GOTO(allocate_checks(p), st, fail);
    BG_CHECK_GOTO(allocate_pinned_batch(p), st, fail);
    BG_CHECK_GOTO(start_workers(p), st, fail);
    *out = p;
    return BG_OK;
fail:
    bg_pipeline_destroy(p);
    return st;
}

void bg_pipeline_destroy(bg_pipeline_t *p) {
    if (p == NULL) return;
    pthread_mutex_lock(&p->lock);
    p->quit = 1;
    /* A job of its own: a device thread polling for one stops at once. */
    atomic_store_explicit(&p->generation,
                          atomic_load_explicit(&p->generation, memory_order_relaxed) + 1,
                          memory_order_release);
    pthread_cond_broadcast(&p->work);
    pthread_mutex_unlock(&p->lock);
    for (int d = 0; p->workers != NULL && d < p->devices; d++)
        if (p->workers[d].started) pthread_join(p->workers[d].thread, NULL);
    /* A GPU may still copy between stages (copies run while the sender
     * computes on): let them end before their buffers are freed. */
    for (int d = 0; p->backends != NULL && d < p->devices; d++)
        if (p->backends[d] != NULL && p->backends[d]->ops->synchronize(p->backends[d]) != BG_OK)
            bg_error_clear();
    for (int s = 0; s < p->stages; s++) {
        if (p->stage != NULL) bg_stage_destroy(p->stage[s]);
        if (p->forward != NULL) bg_channel_destroy(p->forward[s]);
        if (p->backward != NULL) bg_channel_destroy(p->backward[s]);
        if (p->output_sent != NULL) free(p->output_sent[s]);
        if (p->output_records != NULL) free(p->output_records[s]);
    }
    /* The stages' and slots' memory, once they are gone. */
    for (int d = 0; p->arenas != NULL && d < p->devices; d++) bg_arena_release(&p->arenas[d]);
    for (int set = 0; set < 2; set++) {
        if (p->pinned_images[set] != NULL)
            stage_backend(p, 0)->ops->host_free(stage_backend(p, 0), p->pinned_images[set]);
        if (p->pinned_labels[set] != NULL)
            stage_backend(p, p->stages - 1)
                ->ops->host_free(stage_backend(p, p->stages - 1), p->pinned_labels[set]);
    }
    /* The clocks' events before the backends they were made on. */
    bg_pipeline_free_recording(p);
    for (int d = 0; p->backends != NULL && d < p->devices; d++) bg_backend_destroy(p->backends[d]);
    bg_schedule_destroy(p->train);
    bg_schedule_destroy(p->eval);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->work);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->barrier);
    free(p->backends);
    free(p->arenas);
    free(p->stage);
    free(p->first);
    free(p->slots);
    free(p->last_gradient_mb);
    free(p->forward);
    free(p->backward);
    free(p->output_sent);
    free(p->output_records);
    free(p->grad_sent);
    for (int d = 0; p->workers != NULL && d < p->devices; d++) free(p->workers[d].checks);
    free(p->workers);
    free(p->micro_offset);
    free(p->micro_size);
    free(p->layer_squares);
    free(p);
}
