/* brigade topo [--topology FILE.xml]: the machine as the placement planner
 * sees it: packages, NUMA nodes and their memory, cores, GPUs on the PCI bus
 * with their locality, and the links between devices, in the words of
 * `nvidia-smi topo -m`. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cuda/backend_cuda.h"
#include "host_memory.h"
#include "topology.h"

enum { MATRIX_LIMIT = 16 };

static const char help[] =
    "usage: brigade topo [--topology FILE.xml]\n"
    "\n"
    "Shows this machine (or the machine an hwloc XML export describes): packages,\n"
    "NUMA nodes and their memory, cores and which package and NUMA node each is\n"
    "in, the GPUs on the PCI bus with the NUMA node they hang off and, where\n"
    "hwloc's CUDA devices or (on this machine) CUDA's PCI addresses say, their\n"
    "CUDA index and memory, and how devices are linked:\n"
    "  X     the device itself (and in plan's links, two CPU devices on one core)\n"
    "  NODE  within one NUMA node\n"
    "  SYS   across NUMA nodes or sockets (the slowest path)\n"
    "  PIX, PXB, PHB  GPUs behind one PCIe switch, several switches, or one host\n"
    "        bridge\n"
    "  NVL   GPUs joined by NVLink (directly or through NVSwitches), which hwloc\n"
    "        shows only through its NVML plugin (Debian's lacks it: export the\n"
    "        XML where hwloc has it)\n"
    "  GPU   (in plan's links only) two virtual devices of one GPU (cuda:0x4)\n"
    "CPU device cpu:N runs on core N (N mod the cores, where there are more\n"
    "devices than cores, so that they share); of this machine, the cores this\n"
    "process may run on (taskset, a scheduler's affinity) are the ones shown and\n"
    "used, numbered from 0; brigade plan and train read the same\n"
    "topology and order the stages' devices by these links (plan, simulate and\n"
    "sweep --simulate take --topology for a machine you do not have: lstopo\n"
    "--of xml; tests/fixtures/two-socket-8-gpu.xml is an 8-GPU server). Where\n"
    "hwloc shows NVLink, a table of its GB/s a direction follows the links (25\n"
    "a link, as hwloc's NVML plugin counts them), which plan uses (PCIe paths\n"
    "have assumed figures: docs/planner.md).\n"
    "\n"
    "On this machine the CUDA line says whether the CUDA backend is built, which\n"
    "module it loaded (libbrigade-cuda.so: lib/ of the build, LIBDIR/brigade of\n"
    "an install, or the path in BRIGADE_CUDA_MODULE) and how many GPUs CUDA\n"
    "sees, or why it could not load it; a line per GPU then gives its memory and\n"
    "how much of it is free once brigade's CUDA context is made there, which is\n"
    "what the planner gives that GPU's stages when --device-mem is not set. Only\n"
    "GPU work loads the module: commands on CPU devices never do.\n";

/* `index` in buf, or "-" for one the topology does not give (-1). */
static const char *index_text(int index, char *buf, size_t size) {
    if (index < 0) return "-";
    snprintf(buf, size, "%d", index);
    return buf;
}

static void print_cores(const bg_topology_t *t, int cores) {
    printf("\n%6s %8s %6s\n", "core", "package", "NUMA");
    char package[16], numa[16];
    for (int c = 0; c < cores; c++)
        printf("%6d %8s %6s\n", c,
               index_text(bg_topology_core_package(t, c), package, sizeof package),
               index_text(bg_topology_core_numa(t, c), numa, sizeof numa));
    if (cores > MATRIX_LIMIT) {
        printf("\n(%d cores: the link matrix is left out above %d)\n", cores, MATRIX_LIMIT);
        return;
    }
    printf("\nlinks between CPU devices\n%8s", "");
    for (int c = 0; c < cores; c++) printf(" %6s%-2d", "cpu:", c);
    printf("\n");
    for (int a = 0; a < cores; a++) {
        printf("  cpu:%-2d", a);
        for (int b = 0; b < cores; b++) printf(" %8s", bg_topology_core_link(t, a, b));
        printf("\n");
    }
}

/* Asks CUDA about GPU `device` into *info (once: each ask makes a context
 * there) and prints its memory, the whole and what the planner may use
 * (free once brigade's CUDA context exists there); on failure prints why
 * and leaves info->busid empty. */
static void print_cuda_memory(int device, bg_cuda_device_info_t *info) {
    if (bg_cuda_device_info(device, info) != BG_OK) {
        printf("  cuda:%d: %s\n", device, bg_error_message());
        info->busid[0] = '\0';
        return;
    }
    const double gib = 1024.0 * 1024.0 * 1024.0;
    printf("  cuda:%d %s at %s: %.2f GiB, %.2f GiB free for stages (%.0f MiB in use)\n", device,
           info->name, info->busid, (double)info->memory_bytes / gib,
           (double)info->free_bytes / gib,
           (double)(info->memory_bytes - info->free_bytes) / (1024.0 * 1024.0));
}

/* A GPU-by-GPU table: `cell` writes what it shows of GPUs a and b. */
typedef void (*gpu_cell_fn)(const bg_topology_t *t, int a, int b, char *text, size_t size);

static void print_gpu_matrix(const bg_topology_t *t, int gpus, const char *title,
                             gpu_cell_fn cell) {
    printf("\n%s\n%6s", title, "");
    for (int g = 0; g < gpus; g++) printf(" gpu%-3d", g);
    printf("\n");
    for (int a = 0; a < gpus; a++) {
        printf("  gpu%-2d", a);
        for (int b = 0; b < gpus; b++) {
            char text[16];
            cell(t, a, b, text, sizeof text);
            printf(" %6s", text);
        }
        printf("\n");
    }
}

/* How two GPUs are linked, in nvidia-smi topo's words. */
static void link_cell(const bg_topology_t *t, int a, int b, char *text, size_t size) {
    snprintf(text, size, "%s",
             bg_topology_gpu_nvlink_bytes_per_s(t, a, b) > 0 ? "NVL"
                                                             : bg_topology_gpu_link(t, a, b));
}

/* NVLink's speed between two GPUs, GB/s in one direction (hwloc's NVML
 * figure); "-" where they have none. */
static void nvlink_cell(const bg_topology_t *t, int a, int b, char *text, size_t size) {
    const double speed = bg_topology_gpu_nvlink_bytes_per_s(t, a, b);
    if (a == b || speed <= 0)
        snprintf(text, size, "%s", a == b ? "X" : "-");
    else
        snprintf(text, size, "%.1f", speed / 1e9);
}

/* The CUDA device of each GPU of the table (-1 none), and its memory:
 * hwloc's CUDA names where it has them (its CUDA plugin, or an XML file
 * made with it), and on this machine CUDA's own PCI addresses (`live`:
 * the `count` devices CUDA answered for; Debian's hwloc has no CUDA
 * plugin), which are the final word. */
static void cuda_of_gpus(const bg_topology_t *t, const bg_cuda_device_info_t *live, int count,
                         int *cuda, uint64_t *memory) {
    for (int g = 0; g < bg_topology_gpu_count(t); g++) {
        bg_topology_gpu_t info = bg_topology_gpu(t, g);
        cuda[g] = info.cuda;
        memory[g] = info.memory_bytes;
    }
    for (int d = 0; d < count; d++) {
        if (live[d].busid[0] == '\0') continue; /* CUDA could not say */
        const int g = bg_topology_gpu_find(t, d, live[d].busid);
        if (g < 0) continue;
        cuda[g] = d;
        memory[g] = live[d].memory_bytes;
    }
}

static void print_gpus(const bg_topology_t *t, const bg_cuda_device_info_t *live, int count) {
    int gpus = bg_topology_gpu_count(t);
    if (gpus == 0) {
        printf("\nno GPU on the PCI bus in this topology\n");
        return;
    }
    int *cuda_index = calloc((size_t)gpus, sizeof *cuda_index);
    uint64_t *memory_bytes = calloc((size_t)gpus, sizeof *memory_bytes);
    if (cuda_index == NULL || memory_bytes == NULL) {
        free(cuda_index);
        free(memory_bytes);
        printf("\n%d GPU%s on the PCI bus (no memory for their table)\n", gpus,
               gpus == 1 ? "" : "s");
        return;
    }
    cuda_of_gpus(t, live, count, cuda_index, memory_bytes);
    printf("\n%4s %-14s %-11s %6s %8s %-8s %10s\n", "gpu", "PCI bus", "vendor:dev", "NUMA",
           "package", "CUDA", "memory");
    for (int g = 0; g < gpus; g++) {
        bg_topology_gpu_t info = bg_topology_gpu(t, g);
        char cuda[16] = "-", memory[24] = "-";
        if (cuda_index[g] >= 0) snprintf(cuda, sizeof cuda, "cuda:%d", cuda_index[g]);
        if (memory_bytes[g] > 0)
            snprintf(memory, sizeof memory, "%.1f GiB",
                     (double)memory_bytes[g] / (1024.0 * 1024.0 * 1024.0));
        char numa[16], package[16];
        printf("%4d %-14s %04x:%04x   %6s %8s %-8s %10s\n", g, info.busid, info.vendor, info.device,
               index_text(info.numa, numa, sizeof numa),
               index_text(info.package, package, sizeof package), cuda, memory);
    }
    free(cuda_index);
    free(memory_bytes);
    if (gpus > MATRIX_LIMIT) {
        printf("\n(%d GPUs: the link and NVLink matrices are left out above %d)\n", gpus,
               MATRIX_LIMIT);
        return;
    }
    print_gpu_matrix(t, gpus, "links between GPUs (NVL: NVLink)", link_cell);
    /* NVLink's speeds, where there is some. */
    for (int a = 0; a < gpus; a++)
        for (int b = 0; b < gpus; b++)
            if (a != b && bg_topology_gpu_nvlink_bytes_per_s(t, a, b) > 0) {
                print_gpu_matrix(t, gpus, "NVLink GB/s between GPUs, one way (hwloc's figures)",
                                 nvlink_cell);
                return;
            }
}

int bg_cmd_topo(int argc, char **argv) {
    const char *xml = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(help, stdout);
            return 0;
        }
        if (strcmp(argv[i], "--topology") == 0) {
            if (bg_cli_option_value(argc, argv, &i, &xml) != BG_OK)
                return bg_cli_usage_error("topo", "%s", bg_error_message());
            continue;
        }
        static const char *const own[] = {"--topology"};
        if (argv[i][0] == '-') {
            (void)bg_cli_unknown_option(argv[i], own, 1, 0, NULL);
            return bg_cli_usage_error("topo", "%s", bg_error_message());
        }
        return bg_cli_usage_error("topo", "unknown argument '%s'", argv[i]);
    }
    bg_topology_t *t = NULL;
    bg_status_t st = bg_topology_create_with_pci(xml, &t);
    if (st != BG_OK) return bg_cli_fail("topo", st);
    bg_topology_summary_t s = bg_topology_summary(t);
    /* A node whose memory the file does not give reads so, not as 0 GiB
     * (plan then caps no CPU device's memory). */
    int unknown = 0;
    for (int n = 0; n < s.numa_nodes; n++) unknown += bg_topology_numa_memory(t, n) == 0;
    char total[48] = "memory unknown";
    if (s.memory_bytes > 0)
        snprintf(total, sizeof total, "%.1f GiB%s",
                 (double)s.memory_bytes / (1024.0 * 1024.0 * 1024.0),
                 unknown > 0 ? " where known" : "");
    char shown[BG_CLI_SHOWN_MAX];
    printf("%s: %d package%s, %d NUMA node%s (%s), %d core%s, %d hardware thread%s\n",
           xml ? bg_cli_shown(xml, shown, sizeof shown) : "this machine", s.packages,
           s.packages == 1 ? "" : "s", s.numa_nodes, s.numa_nodes == 1 ? "" : "s", total, s.cores,
           s.cores == 1 ? "" : "s", s.pus, s.pus == 1 ? "" : "s");
    for (int n = 0; n < s.numa_nodes; n++) {
        const uint64_t bytes = bg_topology_numa_memory(t, n);
        if (bytes > 0)
            printf("  NUMA node %d: %.1f GiB\n", n, (double)bytes / (1024.0 * 1024.0 * 1024.0));
        else
            printf("  NUMA node %d: memory unknown\n", n);
    }
    /* On this machine plan and simulate share among CPU devices what the
     * system gives processes (placement.c, host_memory_bytes), which in a
     * container or a virtual machine can differ from what its NUMA nodes
     * report. */
    if (xml == NULL) {
        const double host = (double)bg_host_memory_bytes();
        if (host > 0 && fabs(host - (double)s.memory_bytes) > 0.05 * host)
            printf("  (the system reports %.1f GiB in all: what plan and simulate share "
                   "among CPU devices)\n",
                   host / (1024.0 * 1024.0 * 1024.0));
    }
    bg_cuda_device_info_t *live = NULL;
    int live_count = 0;
    if (xml == NULL) {
        const int gpus = bg_cuda_device_count();
        const char *absent = bg_cuda_absent_reason();
        if (absent != NULL)
            printf("CUDA: %s\n", absent);
        else if (bg_cuda_no_device_reason() != NULL)
            printf("CUDA: built, no GPU visible: %s (backend %s)\n", bg_cuda_no_device_reason(),
                   bg_cuda_module_path());
        else
            printf("CUDA: built, %d GPU%s visible (backend %s)\n", gpus, gpus == 1 ? "" : "s",
                   bg_cuda_module_path());
        live = gpus > 0 ? calloc((size_t)gpus, sizeof *live) : NULL;
        if (live != NULL) live_count = gpus;
        for (int g = 0; g < live_count; g++) print_cuda_memory(g, &live[g]);
    }
    print_cores(t, s.cores);
    print_gpus(t, live, live_count);
    free(live);
    bg_topology_destroy(t);
    return 0;
}
