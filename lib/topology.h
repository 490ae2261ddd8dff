/* The machine's topology through hwloc: how many cores there are, and
 * binding a stage's worker thread to its own core. Loaded from the live
 * machine or from an hwloc XML export (so a machine we do not have can be
 * described); binding works only on the live machine. */
#ifndef BG_TOPOLOGY_H
#define BG_TOPOLOGY_H

#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_topology bg_topology_t;

/* Loads the topology of this machine (xml_path NULL) or of an hwloc XML file
 * (BG_ERR_INVALID naming the file if hwloc cannot read it). */
bg_status_t bg_topology_create(const char *xml_path, bg_topology_t **out);

/* The same, with the PCI devices (GPUs and the bridges above them) that
 * bg_topology_gpu_* report. Slower on the live machine (hwloc's PCI plugin),
 * so only `brigade topo` asks for them; without, the GPU count is 0. */
bg_status_t bg_topology_create_with_pci(const char *xml_path, bg_topology_t **out);

/* NULL is a no-op. */
void bg_topology_destroy(bg_topology_t *topo);

/* Physical cores (processing units when hwloc reports no cores); >= 1. */
int bg_topology_core_count(const bg_topology_t *topo);

/* 1 where worker threads can be bound to its cores: this machine as hwloc
 * read it, not a file (a --topology; HWLOC_XMLFILE's, which hwloc takes
 * for another machine unless HWLOC_THISSYSTEM=1 says it is this one). */
int bg_topology_can_bind(const bg_topology_t *topo);

/* What `brigade topo` shows of a machine. */
typedef struct bg_topology_summary {
    int packages, numa_nodes, cores, pus;
    uint64_t memory_bytes; /* total over NUMA nodes (0 when hwloc does not know) */
    /* The same without the nodes that are a GPU's memory (hwloc subtype
     * GPUMemory, as on Grace Hopper): what the CPU cores' stages share. */
    uint64_t host_memory_bytes;
} bg_topology_summary_t;

bg_topology_summary_t bg_topology_summary(const bg_topology_t *topo);

/* The package (socket) and NUMA node of core `core` (0-based logical
 * indexes), -1 when unknown; and the memory of NUMA node `node`. */
int bg_topology_core_package(const bg_topology_t *topo, int core);
int bg_topology_core_numa(const bg_topology_t *topo, int core);
uint64_t bg_topology_numa_memory(const bg_topology_t *topo, int node);

/* GPUs hwloc found on the PCI bus (display or 3D controllers), in bus
 * order, with the NUMA node and package they are attached to (-1 unknown). */
typedef struct bg_topology_gpu {
    char busid[32]; /* "0000:65:00.0"; a domain past 0xffff (some virtual machines) is longer */
    unsigned vendor, device;
    int numa, package;
    int cuda;              /* CUDA's index when hwloc's CUDA device "cudaN" is below it, else -1 */
    uint64_t memory_bytes; /* from that CUDA device, 0 unknown */
} bg_topology_gpu_t;

int bg_topology_gpu_count(const bg_topology_t *topo);
bg_topology_gpu_t bg_topology_gpu(const bg_topology_t *topo, int index);

/* How two GPUs are connected, in nvidia-smi topo's words: "PIX" (one PCIe
 * switch), "PXB" (several switches), "PHB" (one host bridge), "NODE" (one
 * NUMA node, different host bridges), "SYS" (across sockets). */
const char *bg_topology_gpu_link(const bg_topology_t *topo, int a, int b);

/* hwloc's NVLink bandwidth from GPU a to GPU b, bytes per second in one
 * direction, summed over their links (through NVSwitches: the lesser of
 * the two GPUs' links to them); 0 when they have no NVLink or the topology
 * does not say (hwloc shows NVLink only through its NVML plugin, or an
 * XML export made with it). hwloc's figure, theoretical: its plugin counts
 * 25 GB/s a link for NVLink 2 to 4 (hwloc 2.9 to 2.12). */
double bg_topology_gpu_nvlink_bytes_per_s(const bg_topology_t *topo, int a, int b);

/* How two cores are linked: "X" (the same), "NODE" (one NUMA node), "SYS"
 * (across NUMA nodes). */
const char *bg_topology_core_link(const bg_topology_t *topo, int a, int b);

/* How many GPUs CUDA can address on the topology: those it names as CUDA
 * devices, or every GPU when it names none (CUDA then numbers them in bus
 * order). What --devices auto takes. */
int bg_topology_cuda_count(const bg_topology_t *topo);

/* Those GPUs' CUDA numbers, ascending, into out[0..max): the numbers the
 * topology names (which may have gaps: a GPU hidden from CUDA), or 0 to
 * N-1 where it names none. Returns how many it wrote. */
int bg_topology_cuda_numbers(const bg_topology_t *topo, int *out, int max);

/* The topology's GPU (index as for bg_topology_gpu) that CUDA device
 * `cuda_device` is: the one at PCI address `busid` when given (what the
 * CUDA runtime reports on a live machine), else the one whose hwloc CUDA
 * device is "cuda<cuda_device>", else, when the topology names no CUDA
 * devices, the cuda_device-th GPU in bus order (CUDA's default order).
 * -1 when there is none. */
int bg_topology_gpu_find(const bg_topology_t *topo, int cuda_device, const char *busid);

/* Binds the calling thread to core `core % core_count`. BG_ERR_UNSUPPORTED
 * when binding is impossible (an XML topology, or the system refuses), so the
 * caller can decide to run unbound. Thread-safe. */
bg_status_t bg_topology_bind_thread(bg_topology_t *topo, int core);

/* Binds the calling thread to the cores near GPU `gpu` (index as for
 * bg_topology_gpu): those of the closest non-I/O object above its PCI
 * device, usually its NUMA node or package, as hwloc/cudart.h's
 * hwloc_cudart_get_device_cpuset gives them. BG_ERR_UNSUPPORTED as for
 * bg_topology_bind_thread, or when there is no such GPU. Thread-safe. */
bg_status_t bg_topology_bind_thread_near_gpu(bg_topology_t *topo, int gpu);

/* `bytes` of page-aligned host memory bound to NUMA node `node` (logical
 * index, as bg_topology_gpu's numa) where the system allows it; *bound
 * says whether it is. Where binding is impossible (a topology read from
 * XML, node -1 or one hwloc does not know, a system that refuses) the
 * memory is allocated unbound. NULL when memory runs out. Release with
 * bg_topology_free and the same size. Thread-safe. */
void *bg_topology_alloc_on_node(bg_topology_t *topo, int node, size_t bytes, int *bound);
void bg_topology_free(bg_topology_t *topo, void *ptr, size_t bytes);

#ifdef __cplusplus
}
#endif

#endif /* BG_TOPOLOGY_H */
