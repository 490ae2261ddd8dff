/* What the machine's topology tells the planner about a placement's
 * devices: how fast each pair is linked, in nvidia-smi topo's words and as
 * a link of the cost model, and how much memory each device has.
 *
 * Links. Two CPU devices on one NUMA node (or one core) copy through the
 * host link the caller gives (measured by `brigade profile`, or the cost
 * model's default); across NUMA nodes ("SYS") at half its speed. Two
 * virtual devices of one GPU ("GPU") copy device to device. Two GPUs are
 * linked by NVLink where hwloc shows it ("NVL", at hwloc's figure), else as
 * hwloc sees their PCI paths ("PIX", "PXB", "PHB", "NODE", "SYS"; "?" when
 * the topology does not show them), unless the CUDA runtime says that they
 * cannot reach each other directly, when copies are staged through host
 * memory (counted as "SYS"). A CPU and a GPU device copy over PCIe
 * ("HOST").
 *
 * The speeds of PCIe paths are assumptions (BG_LINK_* below: typical
 * figures for PCIe 4.0 x16), not scaled by the link speeds hwloc reports:
 * those are the links' current state (an idle GPU's link drops to 2.5
 * GT/s) or, through hwloc's NVML plugin, 8 GT/s for every generation from
 * 3 on. NVLink's is hwloc's figure (its NVML plugin counts 25 GB/s a link
 * and direction for NVLink 2 to 4), which hwloc shows only through that
 * plugin (or an XML export made with it). None is measured: their order
 * is what matters to the device order; the planner's transfer times are
 * only as good as they are.
 *
 * Memory. A GPU's memory comes from hwloc's CUDA device (an XML export) or
 * from the CUDA runtime (a live machine), divided among the virtual
 * devices placed on it; 0 when unknown, and always 0 for CPU devices (the
 * planner gives them a share of the host). */
#ifndef BG_DEVICE_LINKS_H
#define BG_DEVICE_LINKS_H

#include <stddef.h>
#include <stdint.h>

#include "cost_model.h"
#include "devices.h"
#include "topology.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Assumed speeds, bytes per second, of the links between GPUs. */
#define BG_LINK_SAME_GPU_BYTES_PER_S 1000e9 /* device-to-device copy on one GPU */
#define BG_LINK_PIX_BYTES_PER_S      25e9   /* one PCIe switch */
#define BG_LINK_PXB_BYTES_PER_S      22e9   /* several switches */
#define BG_LINK_PHB_BYTES_PER_S      18e9   /* through one host bridge */
#define BG_LINK_NODE_BYTES_PER_S     14e9   /* host bridges of one NUMA node */
#define BG_LINK_SYS_BYTES_PER_S      8e9    /* across sockets, or staged through the host */
#define BG_LINK_UNKNOWN_BYTES_PER_S  16e9   /* GPUs the topology does not show */
#define BG_LINK_HOST_BYTES_PER_S     16e9   /* between a CPU device and a GPU */
#define BG_LINK_GPU_LATENCY_S        10e-6  /* per transfer, GPU links */

typedef struct bg_device_links {
    int count;            /* n devices */
    bg_cost_link_t *link; /* n x n, link[a * n + b]: a's sends to b */
    const char **word;    /* n x n: "X", "NODE", "SYS", "GPU", "PIX", ... (static strings) */
    /* n: the memory of the GPU the device is on, which its virtual
     * devices share (above); 0 unknown, or not a GPU. */
    size_t *memory_bytes;
    /* The host's memory, which CPU devices share: the topology's NUMA
     * nodes' (the XML file's, or this machine's as hwloc sees them) but a
     * GPU's own, 0 when it does not say. */
    uint64_t host_memory_bytes;
} bg_device_links_t;

/* Describes `devices` on `topo` (which should hold PCI devices when there
 * are GPUs: bg_topology_create_with_pci). `host` is the link between CPU
 * devices of one NUMA node. With `live` set, GPUs are also asked of the
 * CUDA runtime (PCI address, memory, peer access); otherwise (an XML
 * topology of another machine) only the topology counts. BG_ERR_INVALID
 * when an XML topology has GPUs but not the one a device names;
 * BG_ERR_NOMEM. *out is set only on success. */
bg_status_t bg_device_links_create(const bg_topology_t *topo, const bg_device_list_t *devices,
                                   const bg_cost_link_t *host, int live, bg_device_links_t **out);

/* The links among `k` of the devices, in the order `order` gives (device
 * i of the result is order[i] of `all`). *out is set only on success. */
bg_status_t bg_device_links_select(const bg_device_links_t *all, const int *order, int k,
                                   bg_device_links_t **out);

/* The devices the other way round, in place: device i becomes n-1-i. */
void bg_device_links_reverse(bg_device_links_t *links);

/* NULL is a no-op. */
void bg_device_links_destroy(bg_device_links_t *links);

#ifdef __cplusplus
}
#endif

#endif /* BG_DEVICE_LINKS_H */
