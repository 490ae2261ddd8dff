#include "topology.h"
#include "devices.h"
#include "parse.h"
#include "topology_xml.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <hwloc.h>

struct bg_topology {
    hwloc_topology_t hw;
    int from_xml;
    int cores;
    hwloc_obj_type_t core_type; /* HWLOC_OBJ_CORE, or HWLOC_OBJ_PU without cores */
    /* gpus x gpus, bytes per second: hwloc's NVLink bandwidth between two
     * GPUs (load_nvlink); NULL when the topology has none. */
    double *nvlink;
    int gpus;
};

static int is_gpu(hwloc_obj_t obj);
static void load_nvlink(bg_topology_t *t);

/* A GPU's memory in an XML file is believed up to this many KiB (16 PiB). */
#define GPU_MEMORY_MAX_KIB (UINT64_C(1) << 44)

/* A NUMA node's memory in an XML file, and all the nodes' together, are
 * believed up to this many bytes (16 PiB, as a GPU's): hwloc reads
 * local_memory="-5" as 2^64 - 5, and the host's total over the nodes would
 * wrap. */
#define NUMA_MEMORY_MAX_BYTES (UINT64_C(1) << 54)

/* hwloc's CUDA OS device below a GPU (the CUDA plugin's, or an XML export
 * made with it): 1 when `child` is an OS device named cuda followed by
 * anything, else 0. *n is its CUDA number, -1 unless the name is exactly
 * cudaN with N >= 0; *kib its CUDAGlobalMemorySize, 0 when absent or not a
 * whole number of KiB in 1..GPU_MEMORY_MAX_KIB; *kib_text that info's text
 * (NULL when absent). */
static int cuda_osdev(hwloc_obj_t child, int *n, uint64_t *kib, const char **kib_text) {
    *n = -1;
    *kib = 0;
    *kib_text = NULL;
    if (child->type != HWLOC_OBJ_OS_DEVICE || child->name == NULL ||
        strncmp(child->name, "cuda", 4) != 0)
        return 0;
    /* Not sscanf's %d, which is undefined past INT_MAX. */
    const char *digits = child->name + 4;
    uint64_t number;
    if (bg_parse_digits(digits, strlen(digits), INT_MAX, &number)) *n = (int)number;
    const char *text = hwloc_obj_get_info_by_name(child, "CUDAGlobalMemorySize");
    *kib_text = text;
    uint64_t value;
    if (text != NULL && bg_parse_digits(text, strlen(text), GPU_MEMORY_MAX_KIB, &value) &&
        value > 0)
        *kib = value;
    return 1;
}

/* Checks what the planner reads of each GPU in a topology from `xml_path`
 * (cuda_osdev): a CUDA device number used once, and CUDAGlobalMemorySize,
 * where given, a believable whole number of KiB. */
static bg_status_t check_gpus(hwloc_topology_t hw, const char *xml_path) {
    unsigned char seen[BG_DEVICES_MAX_CUDA + 1] = {0}; /* as --devices numbers them */
    for (hwloc_obj_t obj = hwloc_get_next_pcidev(hw, NULL); obj != NULL;
         obj = hwloc_get_next_pcidev(hw, obj)) {
        if (!is_gpu(obj)) continue;
        for (hwloc_obj_t child = obj->io_first_child; child != NULL; child = child->next_sibling) {
            int n;
            uint64_t kib;
            const char *text;
            if (!cuda_osdev(child, &n, &kib, &text)) continue;
            if (n < 0 || n > BG_DEVICES_MAX_CUDA)
                return bg_error_set(BG_ERR_INVALID,
                                    "%s: GPU OS device '%s': not cudaN with N in 0..%d", xml_path,
                                    child->name, BG_DEVICES_MAX_CUDA);
            if (seen[n])
                return bg_error_set(BG_ERR_INVALID, "%s: two GPUs are both named cuda%d", xml_path,
                                    n);
            seen[n] = 1;
            if (text != NULL && kib == 0)
                return bg_error_set(BG_ERR_INVALID,
                                    "%s: cuda%d: CUDAGlobalMemorySize \"%s\" is not a number of "
                                    "KiB in 1..%llu",
                                    xml_path, n, text, (unsigned long long)GPU_MEMORY_MAX_KIB);
        }
    }
    return BG_OK;
}

/* Checks each NUMA node's memory in a topology from `xml_path`, and their
 * sum: at most NUMA_MEMORY_MAX_BYTES. */
static bg_status_t check_numa_nodes(hwloc_topology_t hw, const char *xml_path) {
    const int nodes = hwloc_get_nbobjs_by_type(hw, HWLOC_OBJ_NUMANODE);
    uint64_t total = 0;
    for (int i = 0; i < nodes; i++) {
        hwloc_obj_t node = hwloc_get_obj_by_type(hw, HWLOC_OBJ_NUMANODE, (unsigned)i);
        const uint64_t bytes = node->attr != NULL ? node->attr->numanode.local_memory : 0;
        if (bytes > NUMA_MEMORY_MAX_BYTES)
            return bg_error_set(BG_ERR_INVALID,
                                "%s: NUMA node %u: local_memory reads as %llu bytes, past the "
                                "%llu a node is believed to have (a negative number?)",
                                xml_path, node->os_index, (unsigned long long)bytes,
                                (unsigned long long)NUMA_MEMORY_MAX_BYTES);
        total += bytes; /* both at most 2^54: no wrap */
        if (total > NUMA_MEMORY_MAX_BYTES)
            return bg_error_set(BG_ERR_INVALID,
                                "%s: its NUMA nodes' memory together is past the %llu bytes a "
                                "machine is believed to have",
                                xml_path, (unsigned long long)NUMA_MEMORY_MAX_BYTES);
    }
    return BG_OK;
}

/* Loads a topology; with `pci`, also the PCI devices (GPUs and the bridges
 * above them), which on the live machine takes hwloc's PCI plugin. */
static bg_status_t load(const char *xml_path, int pci, bg_topology_t **out) {
    bg_topology_t *t = calloc(1, sizeof *t);
    if (t == NULL) return bg_error_set(BG_ERR_NOMEM, "topology: out of memory");
    if (hwloc_topology_init(&t->hw) != 0) {
        free(t);
        return bg_error_set(BG_ERR_INTERNAL, "hwloc_topology_init failed");
    }
    bg_status_t st = xml_path != NULL ? bg_topology_xml_check_file(xml_path) : BG_OK;
    if (st != BG_OK) goto fail;
    /* hwloc reads this machine from HWLOC_XMLFILE where it is set. */
    const char *env = getenv("HWLOC_XMLFILE");
    const char *file = xml_path != NULL ? xml_path : env != NULL && env[0] != '\0' ? env : NULL;
    bg_topology_xml_heard_t heard = {0};
    char why[sizeof heard.said + 64] = "";
    /* A HWLOC_XMLFILE that is not there: hwloc passes it over for the
     * machine itself (the CLI says so: bg_cli_note_xmlfile). */
    if (xml_path == NULL && file != NULL && access(file, F_OK) != 0) file = NULL;
    /* What --topology's file is refused for, the same file as
     * HWLOC_XMLFILE is too (until 2026-12-06 hwloc read one of 3 GiB, or
     * /dev/zero without end); a pipe is left to hwloc alone. Named so in
     * messages. */
    char env_name[BG_ERROR_MAX]; /* a message's length: cut only where it would be */
    const char *name = xml_path;
    if (xml_path == NULL && file != NULL) {
        snprintf(env_name, sizeof env_name, "HWLOC_XMLFILE=%s", file);
        name = env_name;
        struct stat info;
        if (stat(file, &info) == 0 && !S_ISFIFO(info.st_mode)) { /* a device read without end */
            st = bg_topology_xml_check_file(file);
            if (st != BG_OK) {
                bg_error_prefix(st, "HWLOC_XMLFILE=");
                goto fail;
            }
        }
    }
    /* The machine itself: only the cores this process may run on (taskset,
     * a batch scheduler's affinity), so that devices wrap onto those and
     * no thread is bound outside them. */
    if (file == NULL)
        hwloc_topology_set_flags(t->hw, HWLOC_TOPOLOGY_FLAG_IS_THISSYSTEM |
                                            HWLOC_TOPOLOGY_FLAG_RESTRICT_TO_CPUBINDING);
    if (file != NULL && bg_topology_xml_regular(file))
        st = bg_topology_xml_probe(file, xml_path == NULL, pci, &heard);
    if (st != BG_OK) goto fail;
    /* hwloc prints some refusals itself: the message below says them. */
    const int stderr_kept = heard.heard ? bg_topology_xml_silence_stderr() : -1;
    if (xml_path != NULL && hwloc_topology_set_xml(t->hw, xml_path) != 0) {
        bg_topology_xml_restore_stderr(stderr_kept);
        bg_topology_xml_refusal(xml_path, &heard, why, sizeof why);
        st = bg_error_set(BG_ERR_INVALID, "%s: not a readable hwloc XML topology%s", xml_path, why);
        goto fail;
    }
    if (pci) hwloc_topology_set_io_types_filter(t->hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
    /* hwloc's own XML reader fails here on a malformed file, where its
     * libxml2 plugin (libhwloc-plugins) fails in set_xml above: one message
     * for both. */
    const int loaded = hwloc_topology_load(t->hw) == 0;
    bg_topology_xml_restore_stderr(stderr_kept);
    if (!loaded) {
        /* errno says nothing here: the reason is the probe's. */
        bg_topology_xml_refusal(file != NULL ? file : "", &heard, why, sizeof why);
        if (xml_path != NULL)
            st = bg_error_set(BG_ERR_INVALID, "%s: not a readable hwloc XML topology%s", xml_path,
                              why);
        else if (file != NULL)
            /* hwloc reads this machine from that file instead: its fault. */
            st = bg_error_set(BG_ERR_INVALID,
                              "HWLOC_XMLFILE=%s: not a readable hwloc XML topology%s (hwloc reads "
                              "it for this machine; unset it)",
                              file, why);
        else
            st = bg_error_set(BG_ERR_INTERNAL, "hwloc could not load this machine's topology (%s)",
                              strerror(errno));
        goto fail;
    }
    if (name != NULL) {
        st = pci ? check_gpus(t->hw, name) : BG_OK;
        if (st == BG_OK) st = check_numa_nodes(t->hw, name);
        if (st != BG_OK) goto fail;
    }
    if (pci) load_nvlink(t);
    t->from_xml = xml_path != NULL;
    t->core_type = HWLOC_OBJ_CORE;
    t->cores = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_CORE);
    if (t->cores < 1) {
        t->core_type = HWLOC_OBJ_PU;
        t->cores = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PU);
    }
    if (t->cores < 1 && file != NULL) {
        /* A machine of no cores: a file cut down by hand or by a tool. */
        st = bg_error_set(BG_ERR_INVALID,
                          "%s%s: no cores: the topology has no Core or PU object to run a device "
                          "on",
                          xml_path != NULL ? "" : "HWLOC_XMLFILE=", file);
        goto fail;
    }
    if (t->cores < 1) t->cores = 1;
    *out = t;
    return BG_OK;
fail:
    hwloc_topology_destroy(t->hw);
    free(t->nvlink);
    free(t);
    return st;
}

bg_status_t bg_topology_create(const char *xml_path, bg_topology_t **out) {
    return load(xml_path, 0, out);
}

bg_status_t bg_topology_create_with_pci(const char *xml_path, bg_topology_t **out) {
    return load(xml_path, 1, out);
}

void bg_topology_destroy(bg_topology_t *t) {
    if (t == NULL) return;
    hwloc_topology_destroy(t->hw);
    free(t->nvlink);
    free(t);
}

int bg_topology_core_count(const bg_topology_t *t) { return t->cores; }

int bg_topology_can_bind(const bg_topology_t *t) {
    return !t->from_xml && hwloc_topology_is_thissystem(t->hw);
}

bg_status_t bg_topology_bind_thread(bg_topology_t *t, int core) {
    if (t->from_xml)
        return bg_error_set(BG_ERR_UNSUPPORTED, "cannot bind threads on a topology read from XML");
    hwloc_obj_t obj = hwloc_get_obj_by_type(t->hw, t->core_type, (unsigned)(core % t->cores));
    if (obj == NULL || obj->cpuset == NULL)
        return bg_error_set(BG_ERR_UNSUPPORTED, "no core %d in the topology", core);
    if (hwloc_set_cpubind(t->hw, obj->cpuset, HWLOC_CPUBIND_THREAD) != 0)
        return bg_error_set(BG_ERR_UNSUPPORTED, "binding to core %d failed: %s", core,
                            strerror(errno));
    return BG_OK;
}

bg_topology_summary_t bg_topology_summary(const bg_topology_t *t) {
    bg_topology_summary_t s = {
        .packages = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PACKAGE),
        .numa_nodes = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_NUMANODE),
        .cores = t->cores,
        .pus = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PU),
    };
    for (int n = 0; n < s.numa_nodes; n++) {
        const uint64_t bytes = bg_topology_numa_memory(t, n);
        hwloc_obj_t node = hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_NUMANODE, (unsigned)n);
        s.memory_bytes += bytes;
        if (node == NULL || node->subtype == NULL || strcmp(node->subtype, "GPUMemory") != 0)
            s.host_memory_bytes += bytes;
    }
    return s;
}

static hwloc_obj_t core_object(const bg_topology_t *t, int core) {
    return hwloc_get_obj_by_type(t->hw, t->core_type, (unsigned)core);
}

int bg_topology_core_package(const bg_topology_t *t, int core) {
    hwloc_obj_t obj = core_object(t, core);
    hwloc_obj_t package =
        obj ? hwloc_get_ancestor_obj_by_type(t->hw, HWLOC_OBJ_PACKAGE, obj) : NULL;
    return package != NULL ? (int)package->logical_index : -1;
}

/* The NUMA node whose cpuset holds `cpuset`, or -1 (also for an empty
 * one, which every set holds). */
static int numa_of(const bg_topology_t *t, hwloc_const_cpuset_t cpuset) {
    if (cpuset == NULL || hwloc_bitmap_iszero(cpuset)) return -1;
    int nodes = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_NUMANODE);
    for (int n = 0; n < nodes; n++) {
        hwloc_obj_t node = hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_NUMANODE, (unsigned)n);
        if (node->cpuset != NULL && hwloc_bitmap_isincluded(cpuset, node->cpuset)) return n;
    }
    return -1;
}

int bg_topology_core_numa(const bg_topology_t *t, int core) {
    hwloc_obj_t obj = core_object(t, core);
    return obj != NULL ? numa_of(t, obj->cpuset) : -1;
}

uint64_t bg_topology_numa_memory(const bg_topology_t *t, int node) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_NUMANODE, (unsigned)node);
    return obj != NULL && obj->attr != NULL ? obj->attr->numanode.local_memory : 0;
}

/* A GPU CUDA may number: an NVIDIA device (vendor 0x10de) of PCI class
 * 0x03xx (display, VGA, 3D controller). Other display devices, such as
 * the BMC's VGA chip a server has beside its GPUs, are not CUDA's: counted,
 * they would shift every cuda:N of a topology without hwloc's CUDA names
 * onto the wrong GPU. */
enum { PCI_VENDOR_NVIDIA = 0x10de };

static int is_gpu(hwloc_obj_t obj) {
    return obj->type == HWLOC_OBJ_PCI_DEVICE && (obj->attr->pcidev.class_id >> 8) == 0x03 &&
           obj->attr->pcidev.vendor_id == PCI_VENDOR_NVIDIA;
}

static hwloc_obj_t gpu_object(const bg_topology_t *t, int index) {
    int seen = 0;
    for (hwloc_obj_t obj = hwloc_get_next_pcidev(t->hw, NULL); obj != NULL;
         obj = hwloc_get_next_pcidev(t->hw, obj))
        if (is_gpu(obj) && seen++ == index) return obj;
    return NULL;
}

int bg_topology_gpu_count(const bg_topology_t *t) {
    int count = 0;
    for (hwloc_obj_t obj = hwloc_get_next_pcidev(t->hw, NULL); obj != NULL;
         obj = hwloc_get_next_pcidev(t->hw, obj))
        count += is_gpu(obj);
    return count;
}

bg_topology_gpu_t bg_topology_gpu(const bg_topology_t *t, int index) {
    bg_topology_gpu_t g = {.numa = -1, .package = -1, .cuda = -1};
    hwloc_obj_t obj = gpu_object(t, index);
    if (obj == NULL) return g;
    const struct hwloc_pcidev_attr_s *pci = &obj->attr->pcidev;
    snprintf(g.busid, sizeof g.busid, "%04x:%02x:%02x.%01x", pci->domain, pci->bus, pci->dev,
             pci->func);
    g.vendor = pci->vendor_id;
    g.device = pci->device_id;
    /* hwloc's CUDA plugin (or an XML export made with it) hangs an OS
     * device "cudaN" with the GPU's memory in KiB below the PCI device. */
    for (hwloc_obj_t child = obj->io_first_child; child != NULL; child = child->next_sibling) {
        int n;
        uint64_t kib;
        const char *text;
        if (!cuda_osdev(child, &n, &kib, &text) || n < 0) continue;
        g.cuda = n;
        g.memory_bytes = kib * 1024;
    }
    hwloc_obj_t near = hwloc_get_non_io_ancestor_obj(t->hw, obj);
    if (near != NULL) {
        /* By the memory below it where that is one node: a topology cut
         * to this process's cores keeps a package none of them is in,
         * with its NUMA node and GPUs, and an empty cpuset. */
        const int only = near->nodeset != NULL && hwloc_bitmap_weight(near->nodeset) == 1
                             ? hwloc_bitmap_first(near->nodeset)
                             : -1;
        hwloc_obj_t node =
            only >= 0 ? hwloc_get_numanode_obj_by_os_index(t->hw, (unsigned)only) : NULL;
        g.numa = node != NULL ? (int)node->logical_index : numa_of(t, near->cpuset);
        hwloc_obj_t package = near->type == HWLOC_OBJ_PACKAGE
                                  ? near
                                  : hwloc_get_ancestor_obj_by_type(t->hw, HWLOC_OBJ_PACKAGE, near);
        g.package = package != NULL ? (int)package->logical_index : -1;
    }
    return g;
}

/* The closest object above both a and b, walking parents: hwloc's
 * hwloc_get_common_ancestor_obj compares depths, which I/O objects (bridges,
 * PCI devices) do not have, and with two GPUs at different PCIe depths (one
 * behind a switch, one on a root port) it walked past the root. */
static hwloc_obj_t common_ancestor(hwloc_obj_t a, hwloc_obj_t b) {
    for (hwloc_obj_t x = a; x != NULL; x = x->parent)
        for (hwloc_obj_t y = b; y != NULL; y = y->parent)
            if (x == y) return x;
    return NULL;
}

/* The bridges between `obj` and its ancestor `top`, neither counted. */
static int bridges_below(hwloc_obj_t obj, hwloc_obj_t top) {
    int bridges = 0;
    for (hwloc_obj_t o = obj->parent; o != NULL && o != top; o = o->parent)
        bridges += o->type == HWLOC_OBJ_BRIDGE;
    return bridges;
}

const char *bg_topology_gpu_link(const bg_topology_t *t, int a, int b) {
    hwloc_obj_t x = gpu_object(t, a), y = gpu_object(t, b);
    if (x == NULL || y == NULL) return "?";
    if (a == b) return "X";
    hwloc_obj_t common = common_ancestor(x, y);
    if (common != NULL && common->type == HWLOC_OBJ_BRIDGE) {
        if (common->attr->bridge.upstream_type == HWLOC_OBJ_BRIDGE_HOST) return "PHB";
        /* Below one switch's upstream port, each GPU sits behind one of its
         * downstream ports; more bridges on either side mean a chain of
         * switches (until 2026-12-06 only x's side was counted, so a pair
         * read PIX one way and PXB the other). */
        return bridges_below(x, common) <= 1 && bridges_below(y, common) <= 1 ? "PIX" : "PXB";
    }
    bg_topology_gpu_t gx = bg_topology_gpu(t, a), gy = bg_topology_gpu(t, b);
    if (gx.numa >= 0 && gx.numa == gy.numa) return "NODE";
    return "SYS";
}

/* The index (as for bg_topology_gpu) of the GPU that `obj` is, or that an
 * OS device of it (hwloc's "nvmlN", "cudaN") is below; -1 for anything
 * else. */
static int gpu_index_of(const bg_topology_t *t, hwloc_obj_t obj) {
    if (obj != NULL && obj->type == HWLOC_OBJ_OS_DEVICE) obj = obj->parent;
    if (obj == NULL || !is_gpu(obj)) return -1;
    int index = 0;
    for (hwloc_obj_t o = hwloc_get_next_pcidev(t->hw, NULL); o != NULL && o != obj;
         o = hwloc_get_next_pcidev(t->hw, o))
        index += is_gpu(o);
    return index;
}

static int is_nvswitch(hwloc_obj_t obj) {
    return obj->type == HWLOC_OBJ_PCI_DEVICE && obj->subtype != NULL &&
           strcmp(obj->subtype, "NVSwitch") == 0;
}

/* Reads hwloc's "NVLinkBandwidth" distances (its NVML plugin's, or an XML
 * export made with it: MB/s per direction, summed over the links between
 * two objects) into t->nvlink. Where the GPUs' links go to NVSwitches, the
 * matrix holds GPU-to-switch figures only: hwloc's transitive closure then
 * gives each pair of GPUs the lesser of their two sums over the switches.
 * A topology without the matrix (no NVML, no NVLink) leaves t->nvlink
 * NULL; so does one hwloc cannot transform. */
static void load_nvlink(bg_topology_t *t) {
    unsigned nr = 1;
    struct hwloc_distances_s *d = NULL;
    if (hwloc_distances_get_by_name(t->hw, "NVLinkBandwidth", &nr, &d, 0) != 0 || nr == 0) return;
    int switches = 0;
    for (unsigned i = 0; i < d->nbobjs; i++) switches += is_nvswitch(d->objs[i]);
    const int gpus = bg_topology_gpu_count(t);
    /* Only through switches: the closure also clears direct links. */
    int usable = gpus > 0;
    if (usable && switches > 0)
        usable = hwloc_distances_transform(t->hw, d, HWLOC_DISTANCES_TRANSFORM_TRANSITIVE_CLOSURE,
                                           NULL, 0) == 0;
    if (usable) {
        t->nvlink = calloc((size_t)gpus * (size_t)gpus, sizeof *t->nvlink);
        t->gpus = gpus;
    }
    for (unsigned i = 0; t->nvlink != NULL && i < d->nbobjs; i++) {
        const int a = gpu_index_of(t, d->objs[i]);
        for (unsigned j = 0; a >= 0 && j < d->nbobjs; j++) {
            const int b = gpu_index_of(t, d->objs[j]);
            const double mb_per_s = (double)d->values[i * d->nbobjs + j];
            /* Past 10 TB/s a figure is a broken file's, not a link's. */
            if (b >= 0 && a != b && mb_per_s <= 1e7) t->nvlink[a * gpus + b] = 1e6 * mb_per_s;
        }
    }
    hwloc_distances_release(t->hw, d);
}

double bg_topology_gpu_nvlink_bytes_per_s(const bg_topology_t *t, int a, int b) {
    if (t->nvlink == NULL || a < 0 || b < 0 || a >= t->gpus || b >= t->gpus) return 0;
    return t->nvlink[a * t->gpus + b];
}

const char *bg_topology_core_link(const bg_topology_t *t, int a, int b) {
    if (a == b) return "X";
    int na = bg_topology_core_numa(t, a), nb = bg_topology_core_numa(t, b);
    if (na >= 0 && na == nb) return "NODE";
    return "SYS";
}

/* How many GPUs have a CUDA index (hwloc's cudaN OS devices). */
static int gpus_named_by_cuda(const bg_topology_t *t) {
    int named = 0, gpus = bg_topology_gpu_count(t);
    for (int g = 0; g < gpus; g++) named += bg_topology_gpu(t, g).cuda >= 0;
    return named;
}

int bg_topology_cuda_count(const bg_topology_t *t) {
    const int named = gpus_named_by_cuda(t);
    return named > 0 ? named : bg_topology_gpu_count(t);
}

static int ascending(const void *a, const void *b) {
    const int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

int bg_topology_cuda_numbers(const bg_topology_t *t, int *out, int max) {
    const int gpus = bg_topology_gpu_count(t), named = gpus_named_by_cuda(t);
    int count = 0;
    for (int g = 0; g < gpus && count < max; g++) {
        const int n = bg_topology_gpu(t, g).cuda;
        if (named == 0 || n >= 0) out[count++] = named == 0 ? g : n;
    }
    qsort(out, (size_t)count, sizeof *out, ascending);
    return count;
}

int bg_topology_gpu_find(const bg_topology_t *t, int cuda_device, const char *busid) {
    int gpus = bg_topology_gpu_count(t);
    for (int g = 0; g < gpus; g++) {
        bg_topology_gpu_t info = bg_topology_gpu(t, g);
        if (busid != NULL ? strcasecmp(info.busid, busid) == 0 : info.cuda == cuda_device) return g;
    }
    /* Without hwloc's CUDA devices, CUDA numbers GPUs in PCI bus order. A
     * topology that names some GPUs (others hidden from CUDA, as with
     * CUDA_VISIBLE_DEVICES) has no GPU of an index it does not name. */
    return busid == NULL && cuda_device >= 0 && cuda_device < gpus && gpus_named_by_cuda(t) == 0
               ? cuda_device
               : -1;
}

void *bg_topology_alloc_on_node(bg_topology_t *t, int node, size_t bytes, int *bound) {
    *bound = 0;
    hwloc_obj_t obj = node >= 0 && !t->from_xml
                          ? hwloc_get_obj_by_type(t->hw, HWLOC_OBJ_NUMANODE, (unsigned)node)
                          : NULL;
    if (obj == NULL) return hwloc_alloc(t->hw, bytes);
    /* Without STRICT hwloc still allocates where binding fails; then ask
     * where the pages are meant to be. */
    void *ptr = hwloc_alloc_membind(t->hw, bytes, obj->nodeset, HWLOC_MEMBIND_BIND,
                                    HWLOC_MEMBIND_BYNODESET);
    if (ptr == NULL) return NULL;
    hwloc_nodeset_t where = hwloc_bitmap_alloc();
    hwloc_membind_policy_t policy;
    if (where != NULL &&
        hwloc_get_area_membind(t->hw, ptr, bytes, where, &policy, HWLOC_MEMBIND_BYNODESET) == 0)
        *bound = policy == HWLOC_MEMBIND_BIND && hwloc_bitmap_isequal(where, obj->nodeset);
    hwloc_bitmap_free(where);
    return ptr;
}

void bg_topology_free(bg_topology_t *t, void *ptr, size_t bytes) {
    if (ptr != NULL) hwloc_free(t->hw, ptr, bytes);
}

bg_status_t bg_topology_bind_thread_near_gpu(bg_topology_t *t, int gpu) {
    if (t->from_xml)
        return bg_error_set(BG_ERR_UNSUPPORTED, "cannot bind threads on a topology read from XML");
    hwloc_obj_t obj = gpu_object(t, gpu);
    hwloc_obj_t near = obj != NULL ? hwloc_get_non_io_ancestor_obj(t->hw, obj) : NULL;
    if (near == NULL || near->cpuset == NULL)
        return bg_error_set(BG_ERR_UNSUPPORTED, "no GPU %d in the topology", gpu);
    if (hwloc_bitmap_iszero(near->cpuset)) /* taskset left none of its cores */
        return bg_error_set(BG_ERR_UNSUPPORTED,
                            "the cores near GPU %d are outside those this process may run on", gpu);
    if (hwloc_set_cpubind(t->hw, near->cpuset, HWLOC_CPUBIND_THREAD) != 0)
        return bg_error_set(BG_ERR_UNSUPPORTED, "binding near GPU %d failed: %s", gpu,
                            strerror(errno));
    return BG_OK;
}
