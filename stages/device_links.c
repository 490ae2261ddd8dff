#include "device_links.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/backend_cuda.h"

/* A CPU device's link across NUMA nodes, as a share of the host link
 * within one (an assumption, like the GPU figures). */
static const double cross_numa_share = 0.5;

void bg_device_links_destroy(bg_device_links_t *l) {
    if (l == NULL) return;
    free(l->link);
    free(l->word);
    free(l->memory_bytes);
    free(l);
}

static bg_status_t links_alloc(int n, bg_device_links_t **out) {
    bg_device_links_t *l = calloc(1, sizeof *l);
    if (l != NULL) {
        l->count = n;
        l->link = calloc((size_t)(n * n), sizeof *l->link);
        l->word = calloc((size_t)(n * n), sizeof *l->word);
        l->memory_bytes = calloc((size_t)n, sizeof *l->memory_bytes);
    }
    if (l == NULL || l->link == NULL || l->word == NULL || l->memory_bytes == NULL) {
        bg_device_links_destroy(l);
        return bg_error_set(BG_ERR_NOMEM, "device links: out of memory for %d devices", n);
    }
    *out = l;
    return BG_OK;
}

/* What is known of one GPU device: its GPU in the topology (-1 unknown)
 * and the GPU's memory for stages (free memory on a live GPU, the whole
 * memory of an XML file's). */
typedef struct gpu_place {
    int topo_gpu;
    size_t memory_bytes;
} gpu_place_t;

/* Whether the topology's GPUs, every one named by hwloc's CUDA devices,
 * are not cuda:0 to cuda:N-1; if so their names into buf ("cuda:0,
 * cuda:1, cuda:5, cuda:7", ending ", ..." where the next would not fit). */
static int cuda_names_have_gaps(const bg_topology_t *topo, char *buf, size_t size) {
    const int gpus = bg_topology_gpu_count(topo);
    int gaps = 0;
    for (int g = 0; g < gpus; g++) gaps |= bg_topology_gpu(topo, g).cuda >= gpus;
    static const char more[] = ", ...";
    if (!gaps || size < sizeof more) return 0;
    size_t used = 0;
    buf[0] = '\0';
    for (int g = 0; g < gpus; g++) {
        char name[24];
        const int n = snprintf(name, sizeof name, "%scuda:%d", g > 0 ? ", " : "",
                               bg_topology_gpu(topo, g).cuda);
        /* Room for this name and, unless it is the last, for ", ...". */
        const size_t after = g + 1 < gpus ? sizeof more - 1 : 0;
        if (n < 0 || used + (size_t)n + after >= size) {
            memcpy(buf + used, more, sizeof more);
            break;
        }
        memcpy(buf + used, name, (size_t)n + 1);
        used += (size_t)n;
    }
    return 1;
}

static bg_status_t place_gpu(const bg_topology_t *topo, const bg_device_t *d, int live,
                             gpu_place_t *out) {
    gpu_place_t g = {.topo_gpu = -1};
    if (live) {
        /* Planning a GPU this machine does not have would assume its speed
         * and check no memory; another machine is described by its XML. */
        BG_CHECK(bg_device_check_present(d, "use --devices cpu:N; plan, simulate and sweep "
                                            "--simulate take another machine's GPUs from "
                                            "--topology FILE, its hwloc XML"));
        bg_cuda_device_info_t info;
        BG_CHECK(bg_cuda_device_info(d->physical, &info));
        g.topo_gpu = bg_topology_gpu_find(topo, d->physical, info.busid);
        /* A plan must fit what the run will find: the GPU's memory less its
           CUDA context and other processes' allocations. */
        g.memory_bytes = info.free_bytes;
    } else {
        g.topo_gpu = bg_topology_gpu_find(topo, d->physical, NULL);
        const int gpus = bg_topology_gpu_count(topo), cuda = bg_topology_cuda_count(topo);
        /* Some GPUs named by hwloc's CUDA devices: the others are hidden
         * from CUDA (CUDA_VISIBLE_DEVICES when it was written). */
        if (g.topo_gpu < 0 && cuda < gpus)
            return bg_error_set(BG_ERR_INVALID,
                                "%s: the topology names %d of its %d GPUs as CUDA devices (the "
                                "others were hidden from CUDA), none of them %d (see brigade topo "
                                "--topology)",
                                d->name, cuda, gpus, d->physical);
        /* All named, but not 0 to N-1: the names, not "no GPU 2" of a
         * file whose cuda:7 is there (a tester's). */
        char names[160];
        if (g.topo_gpu < 0 && cuda_names_have_gaps(topo, names, sizeof names))
            return bg_error_set(BG_ERR_INVALID,
                                "%s: the topology's %d GPU%s %s %s as hwloc's CUDA devices "
                                "name %s; none is cuda:%d (see brigade topo --topology)",
                                d->name, gpus, gpus == 1 ? "" : "s", gpus == 1 ? "is" : "are",
                                names, gpus == 1 ? "it" : "them", d->physical);
        if (g.topo_gpu < 0)
            return bg_error_set(BG_ERR_INVALID,
                                "%s: the topology has %d GPU%s%s; there is no GPU %d on it",
                                d->name, gpus, gpus == 1 ? "" : "s",
                                gpus > 0 ? " (see brigade topo --topology)" : "", d->physical);
        g.memory_bytes = bg_topology_gpu(topo, g.topo_gpu).memory_bytes;
    }
    *out = g;
    return BG_OK;
}

static bg_cost_link_t gpu_link(double bytes_per_s) {
    return (bg_cost_link_t){.bytes_per_s = bytes_per_s, .latency_s = BG_LINK_GPU_LATENCY_S};
}

/* The link between GPU devices a and b (different devices). */
static void link_gpus(const bg_topology_t *topo, const bg_device_t *a, const bg_device_t *b,
                      const gpu_place_t *ga, const gpu_place_t *gb, int live, bg_cost_link_t *link,
                      const char **word) {
    static const struct {
        const char *word;
        double bytes_per_s;
    } speeds[] = {
        {"PIX", BG_LINK_PIX_BYTES_PER_S}, {"PXB", BG_LINK_PXB_BYTES_PER_S},
        {"PHB", BG_LINK_PHB_BYTES_PER_S}, {"NODE", BG_LINK_NODE_BYTES_PER_S},
        {"SYS", BG_LINK_SYS_BYTES_PER_S},
    };
    if (a->physical == b->physical) {
        *word = "GPU";
        *link = gpu_link(BG_LINK_SAME_GPU_BYTES_PER_S);
        return;
    }
    *word = "?";
    *link = gpu_link(BG_LINK_UNKNOWN_BYTES_PER_S);
    if (ga->topo_gpu >= 0 && gb->topo_gpu >= 0) {
        const char *w = bg_topology_gpu_link(topo, ga->topo_gpu, gb->topo_gpu);
        for (size_t i = 0; i < sizeof speeds / sizeof speeds[0]; i++)
            if (strcmp(w, speeds[i].word) == 0) {
                *word = speeds[i].word;
                *link = gpu_link(speeds[i].bytes_per_s);
            }
        const double nvlink = bg_topology_gpu_nvlink_bytes_per_s(topo, ga->topo_gpu, gb->topo_gpu);
        if (nvlink > 0) {
            *word = "NVL";
            *link = gpu_link(nvlink);
        }
    }
    /* Without peer access a copy goes through pinned host memory. */
    if (live && a->physical < bg_cuda_device_count() && b->physical < bg_cuda_device_count() &&
        bg_cuda_peer_rank(a->physical, b->physical) < 0) {
        *word = "SYS";
        *link = gpu_link(BG_LINK_SYS_BYTES_PER_S);
    }
}

bg_status_t bg_device_links_create(const bg_topology_t *topo, const bg_device_list_t *devices,
                                   const bg_cost_link_t *host, int live, bg_device_links_t **out) {
    const int n = devices->count;
    bg_device_links_t *l = NULL;
    gpu_place_t *gpu = calloc((size_t)(n > 0 ? n : 1), sizeof *gpu);
    if (gpu == NULL) return bg_error_set(BG_ERR_NOMEM, "device links: out of memory");
    bg_status_t st = links_alloc(n, &l);
    if (st == BG_OK) l->host_memory_bytes = bg_topology_summary(topo).host_memory_bytes;
    for (int d = 0; st == BG_OK && d < n; d++) {
        const bg_device_t *dev = &devices->devices[d];
        if (dev->kind != BG_DEVICE_CUDA) continue;
        st = place_gpu(topo, dev, live, &gpu[d]);
        l->memory_bytes[d] = gpu[d].memory_bytes;
    }
    for (int a = 0; st == BG_OK && a < n; a++) {
        for (int b = 0; b < n; b++) {
            const bg_device_t *da = &devices->devices[a], *db = &devices->devices[b];
            bg_cost_link_t *link = &l->link[a * n + b];
            const char **word = &l->word[a * n + b];
            if (a == b) {
                /* Stages on one device (interleaved on one): its own copies,
                 * a GPU's by its copy engine. */
                *word = "X";
                *link = da->kind == BG_DEVICE_CUDA ? gpu_link(BG_LINK_SAME_GPU_BYTES_PER_S) : *host;
            } else if (da->kind == BG_DEVICE_CUDA && db->kind == BG_DEVICE_CUDA) {
                link_gpus(topo, da, db, &gpu[a], &gpu[b], live, link, word);
            } else if (da->kind == BG_DEVICE_CUDA || db->kind == BG_DEVICE_CUDA) {
                *word = "HOST";
                *link = gpu_link(BG_LINK_HOST_BYTES_PER_S);
            } else {
                const char *w = da->physical == db->physical
                                    ? "X"
                                    : bg_topology_core_link(topo, da->physical, db->physical);
                *word = w;
                *link = *host;
                if (strcmp(w, "SYS") == 0) {
                    link->bytes_per_s *= cross_numa_share;
                    link->copy_bytes_per_s *= cross_numa_share;
                }
            }
        }
    }
    free(gpu);
    if (st != BG_OK) {
        bg_device_links_destroy(l);
        return st;
    }
    *out = l;
    return BG_OK;
}

bg_status_t bg_device_links_select(const bg_device_links_t *all, const int *order, int k,
                                   bg_device_links_t **out) {
    bg_device_links_t *l = NULL;
    BG_CHECK(links_alloc(k, &l));
    const int n = all->count;
    l->host_memory_bytes = all->host_memory_bytes;
    for (int i = 0; i < k; i++) {
        l->memory_bytes[i] = all->memory_bytes[order[i]];
        for (int j = 0; j < k; j++) {
            l->link[i * k + j] = all->link[order[i] * n + order[j]];
            l->word[i * k + j] = all->word[order[i] * n + order[j]];
        }
    }
    *out = l;
    return BG_OK;
}

void bg_device_links_reverse(bg_device_links_t *l) {
    const int n = l->count;
    for (int i = 0, j = n - 1; i < j; i++, j--) {
        const size_t m = l->memory_bytes[i];
        l->memory_bytes[i] = l->memory_bytes[j];
        l->memory_bytes[j] = m;
    }
    /* Entry (a, b) trades with (n-1-a, n-1-b): the matrix turned half way
     * round, which is its cells in the reverse order. */
    for (int i = 0, j = n * n - 1; i < j; i++, j--) {
        const bg_cost_link_t link = l->link[i];
        l->link[i] = l->link[j];
        l->link[j] = link;
        const char *word = l->word[i];
        l->word[i] = l->word[j];
        l->word[j] = word;
    }
}
