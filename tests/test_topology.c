/* The topology read from hwloc XML fixtures of machines we do not have
 * (lib/topology.h), and the links and memory the planner takes from it
 * (stages/device_links.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "device_links.h"
#include "devices.h"
#include "topology.h"

static const uint64_t gib = 1024ull * 1024 * 1024;

/* Loads tests/fixtures/NAME with PCI devices. */
static bg_topology_t *load_fixture(const char *name) {
    const char *root = getenv("BRIGADE_SOURCE_ROOT");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/fixtures/%s", root != NULL ? root : "..", name);
    bg_topology_t *t = NULL;
    assert_int_equal(bg_topology_create_with_pci(path, &t), BG_OK);
    return t;
}

/* The links the planner takes for device list `text` on `t` (an XML
 * topology: `cores` cores, `gpus` GPUs), CPU devices on one NUMA node
 * linked at `host`. */
static bg_device_links_t *links_of(const bg_topology_t *t, const char *text, int cores, int gpus,
                                   const bg_cost_link_t *host) {
    bg_device_list_t list;
    assert_int_equal(bg_device_list_parse_on(text, cores, gpus, &list), BG_OK);
    bg_device_links_t *l = NULL;
    assert_int_equal(bg_device_links_create(t, &list, host, 0, &l), BG_OK);
    return l;
}

static void test_gpu_server(void **state) {
    (void)state;
    bg_topology_t *t = load_fixture("two-socket-8-gpu.xml");
    bg_topology_summary_t s = bg_topology_summary(t);
    assert_int_equal(s.packages, 2);
    assert_int_equal(s.numa_nodes, 2);
    assert_int_equal(s.cores, 16);
    assert_int_equal(bg_topology_gpu_count(t), 8);
    for (int g = 0; g < 8; g++) {
        bg_topology_gpu_t info = bg_topology_gpu(t, g);
        assert_int_equal(info.cuda, g);
        assert_int_equal(info.package, g / 4);
        assert_int_equal(info.numa, g / 4);
        assert_int_equal(info.vendor, 0x10de);
        assert_true(info.memory_bytes == 140 * gib);
    }
    assert_string_equal(bg_topology_gpu(t, 5).busid, "0000:93:00.0");
    assert_string_equal(bg_topology_gpu_link(t, 0, 0), "X");
    assert_string_equal(bg_topology_gpu_link(t, 0, 1), "PIX");
    assert_string_equal(bg_topology_gpu_link(t, 6, 7), "PIX");
    assert_string_equal(bg_topology_gpu_link(t, 1, 2), "PHB");
    assert_string_equal(bg_topology_gpu_link(t, 3, 4), "SYS");
    assert_string_equal(bg_topology_gpu_link(t, 0, 8), "?");
    /* CUDA device to topology GPU: by PCI address, else by hwloc's name. */
    assert_int_equal(bg_topology_gpu_find(t, 0, "0000:A2:00.0"), 6);
    assert_int_equal(bg_topology_gpu_find(t, 0, "0000:ff:00.0"), -1);
    assert_int_equal(bg_topology_gpu_find(t, 7, NULL), 7);
    assert_int_equal(bg_topology_gpu_find(t, 8, NULL), -1);
    assert_string_equal(bg_topology_core_link(t, 0, 7), "NODE");
    assert_string_equal(bg_topology_core_link(t, 7, 8), "SYS");
    bg_topology_destroy(t);
}

/* A server's BMC display chip (ASPEED 1a03:2000, class 0300) is no GPU of
 * CUDA's: without hwloc's CUDA names, CUDA numbers the NVIDIA ones in PCI
 * order from 0. One GPU behind a PCIe switch and one on a root port are
 * linked through their host bridge (hwloc's depth-based common ancestor
 * walked past the root on such a pair: a crash). */
static void test_uneven_pcie(void **state) {
    (void)state;
    bg_topology_t *t = load_fixture("uneven-pcie-gpus.xml");
    assert_int_equal(bg_topology_gpu_count(t), 2);
    assert_int_equal(bg_topology_cuda_count(t), 2);
    assert_string_equal(bg_topology_gpu(t, 0).busid, "0000:11:00.0");
    assert_string_equal(bg_topology_gpu(t, 1).busid, "0000:20:00.0");
    assert_int_equal(bg_topology_gpu(t, 0).cuda, -1);
    assert_true(bg_topology_gpu(t, 0).memory_bytes == 0);
    assert_int_equal(bg_topology_gpu_find(t, 0, NULL), 0);
    assert_int_equal(bg_topology_gpu_find(t, 1, NULL), 1);
    assert_int_equal(bg_topology_gpu_find(t, 2, NULL), -1);
    assert_string_equal(bg_topology_gpu_link(t, 0, 1), "PHB");
    assert_string_equal(bg_topology_gpu_link(t, 1, 0), "PHB");
    bg_topology_destroy(t);
}

/* GPU 0 on a downstream port of a switch; GPUs 1 and 2 on a second switch
 * below another of its ports, and GPU 3 on the host bridge. A pair is one
 * link whichever way it is read: until 2026-12-06 only the first GPU's
 * bridges were counted, so 0-1 read PIX and 1-0 PXB. */
static void test_chained_switches(void **state) {
    (void)state;
    bg_topology_t *t = load_fixture("chained-pcie-switches.xml");
    assert_int_equal(bg_topology_gpu_count(t), 4);
    const char *want[4][4] = {{"X", "PXB", "PXB", "PHB"},
                              {"PXB", "X", "PIX", "PHB"},
                              {"PXB", "PIX", "X", "PHB"},
                              {"PHB", "PHB", "PHB", "X"}};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) assert_string_equal(bg_topology_gpu_link(t, a, b), want[a][b]);
    bg_topology_destroy(t);
}

static void test_gpu_links(void **state) {
    (void)state;
    bg_topology_t *t = load_fixture("two-socket-8-gpu.xml");
    const bg_cost_link_t host = {.bytes_per_s = 5e9, .latency_s = 1e-6};
    bg_device_links_t *l = links_of(t, "cuda:0x2,cuda:1,cuda:4", 16, 8, &host);
    assert_int_equal(l->count, 4);
    const char *want[4][4] = {{"X", "GPU", "PIX", "SYS"},
                              {"GPU", "X", "PIX", "SYS"},
                              {"PIX", "PIX", "X", "SYS"},
                              {"SYS", "SYS", "SYS", "X"}};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) assert_string_equal(l->word[a * 4 + b], want[a][b]);
    assert_true(l->link[0 * 4 + 1].bytes_per_s == BG_LINK_SAME_GPU_BYTES_PER_S);
    assert_true(l->link[1 * 4 + 2].bytes_per_s == BG_LINK_PIX_BYTES_PER_S);
    assert_true(l->link[2 * 4 + 3].bytes_per_s == BG_LINK_SYS_BYTES_PER_S);
    assert_true(l->link[2 * 4 + 3].latency_s == BG_LINK_GPU_LATENCY_S);
    /* Between stages on one GPU its copy engine carries the bytes, not the
     * host's threads (copy_bytes_per_s 0). */
    assert_true(l->link[2 * 4 + 2].bytes_per_s == BG_LINK_SAME_GPU_BYTES_PER_S);
    assert_true(l->link[2 * 4 + 2].copy_bytes_per_s == 0);
    /* Each device has its GPU's whole memory, which the planner divides
     * among the virtual devices a run uses (cli/placement.c). */
    assert_true(l->memory_bytes[0] == 140 * gib && l->memory_bytes[1] == 140 * gib);
    assert_true(l->memory_bytes[2] == 140 * gib && l->memory_bytes[3] == 140 * gib);

    /* Choosing devices 3 and 2, in that order, keeps their rows. */
    bg_device_links_t *two = NULL;
    const int order[2] = {3, 2};
    assert_int_equal(bg_device_links_select(l, order, 2, &two), BG_OK);
    assert_string_equal(two->word[0 * 2 + 1], "SYS");
    assert_true(two->memory_bytes[0] == 140 * gib);
    bg_device_links_destroy(two);

    /* The other way round in place: cuda:4, cuda:1, cuda:0/1, cuda:0/0,
     * each pair's link as it was. */
    l->memory_bytes[0] = 1; /* to tell cuda:0/0 by */
    bg_device_links_reverse(l);
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) assert_string_equal(l->word[a * 4 + b], want[3 - a][3 - b]);
    assert_true(l->link[3 * 4 + 2].bytes_per_s == BG_LINK_SAME_GPU_BYTES_PER_S);
    assert_true(l->link[0 * 4 + 1].bytes_per_s == BG_LINK_SYS_BYTES_PER_S);
    assert_true(l->memory_bytes[3] == 1 && l->memory_bytes[0] == 140 * gib);
    bg_device_links_reverse(l);
    assert_true(l->memory_bytes[0] == 1 &&
                l->link[0 * 4 + 1].bytes_per_s == BG_LINK_SAME_GPU_BYTES_PER_S);
    bg_device_links_destroy(l);

    /* A GPU the XML does not have is an error that names it. */
    bg_device_list_t list;
    assert_int_equal(bg_device_list_parse_on("cuda:8", 16, 8, &list), BG_OK);
    l = NULL;
    assert_int_equal(bg_device_links_create(t, &list, &host, 0, &l), BG_ERR_INVALID);
    assert_null(l);
    assert_non_null(strstr(bg_error_message(), "cuda:8: the topology has 8 GPUs"));
    bg_device_links_destroy(NULL);
    bg_topology_destroy(t);
}

/* An HGX board: every GPU's NVLinks go to four NVSwitches, and hwloc's
 * matrix (its NVML plugin's) holds only GPU-to-switch figures; each pair of
 * GPUs gets the lesser of their sums over the switches, 18 links of 25
 * GB/s. */
static void test_nvlink_switches(void **state) {
    (void)state;
    bg_topology_t *t = load_fixture("hgx-8-gpu-nvlink.xml");
    assert_int_equal(bg_topology_gpu_count(t), 8); /* the NVSwitches are no GPUs */
    for (int a = 0; a < 8; a++)
        for (int b = 0; b < 8; b++)
            assert_true(bg_topology_gpu_nvlink_bytes_per_s(t, a, b) == (a == b ? 0 : 450e9));
    assert_true(bg_topology_gpu_nvlink_bytes_per_s(t, 0, 8) == 0);
    assert_string_equal(bg_topology_gpu_link(t, 3, 4), "SYS"); /* the PCIe path's word */

    const bg_cost_link_t host = {.bytes_per_s = 5e9, .latency_s = 1e-6};
    bg_device_links_t *l = links_of(t, "cuda:0,cuda:4", 16, 8, &host);
    assert_string_equal(l->word[0 * 2 + 1], "NVL");
    assert_true(l->link[0 * 2 + 1].bytes_per_s == 450e9);
    assert_true(l->link[0 * 2 + 1].latency_s == BG_LINK_GPU_LATENCY_S);
    bg_device_links_destroy(l);
    bg_topology_destroy(t);

    /* Without the matrix, no NVLink. */
    t = load_fixture("two-socket-8-gpu.xml");
    assert_true(bg_topology_gpu_nvlink_bytes_per_s(t, 0, 1) == 0);
    bg_topology_destroy(t);
}

/* Four PCIe GPUs on root ports of one host bridge, NVLink bridges joining
 * 0 with 1 and 2 with 3 (4 links each; no switch: the matrix is used as it
 * is). A pair without NVLink goes over PCIe at the PHB figure, whatever
 * link speed hwloc reports (GPU 2's is 4.0 x8: a link's current state). */
static void test_nvlink_pairs(void **state) {
    (void)state;
    bg_topology_t *t = load_fixture("nvlink-bridged-pairs.xml");
    assert_true(bg_topology_gpu_nvlink_bytes_per_s(t, 0, 1) == 100e9);
    assert_true(bg_topology_gpu_nvlink_bytes_per_s(t, 3, 2) == 100e9);
    assert_true(bg_topology_gpu_nvlink_bytes_per_s(t, 0, 2) == 0);
    assert_true(bg_topology_gpu_nvlink_bytes_per_s(t, 0, 0) == 0);

    const bg_cost_link_t host = {.bytes_per_s = 5e9, .latency_s = 1e-6};
    bg_device_links_t *l = links_of(t, "cuda:0,cuda:1,cuda:2,cuda:3", 2, 4, &host);
    assert_string_equal(l->word[0 * 4 + 1], "NVL");
    assert_true(l->link[0 * 4 + 1].bytes_per_s == 100e9);
    assert_string_equal(l->word[1 * 4 + 2], "PHB");
    assert_true(l->link[1 * 4 + 2].bytes_per_s == BG_LINK_PHB_BYTES_PER_S);
    assert_string_equal(l->word[0 * 4 + 3], "PHB");
    assert_true(l->link[0 * 4 + 3].bytes_per_s == BG_LINK_PHB_BYTES_PER_S);
    assert_true(l->memory_bytes[2] == 80 * gib);
    bg_device_links_destroy(l);
    bg_topology_destroy(t);
}

static void test_cpu_links(void **state) {
    (void)state;
    bg_topology_t *t = load_fixture("two-socket-8-core.xml");
    /* cpu:0..3 on package 0, cpu:4.. on package 1; cpu:9 wraps to core 1. */
    const bg_cost_link_t host = {.bytes_per_s = 6e9, .latency_s = 2e-6};
    bg_device_links_t *l = links_of(t, "cpu:10", 8, 0, &host);
    assert_string_equal(l->word[0 * 10 + 3], "NODE");
    assert_true(l->link[0 * 10 + 3].bytes_per_s == 6e9);
    assert_string_equal(l->word[3 * 10 + 4], "SYS");
    assert_true(l->link[3 * 10 + 4].bytes_per_s == 3e9);
    assert_true(l->link[3 * 10 + 4].latency_s == 2e-6);
    assert_string_equal(l->word[1 * 10 + 9], "X");       /* the same core */
    assert_true(l->link[2 * 10 + 2].bytes_per_s == 6e9); /* one device: the host's */
    assert_true(l->memory_bytes[0] == 0);
    bg_device_links_destroy(l);
    bg_topology_destroy(t);
}

/* Host memory on a NUMA node: bound on this machine's node 0 where the
 * system allows it (then hwloc reports the node back), unbound but usable
 * on an XML topology, for node -1 and for a node the machine lacks. */
static void test_alloc_on_node(void **state) {
    (void)state;
    enum { BYTES = 3 << 20 };
    bg_topology_t *live = NULL, *xml = load_fixture("two-socket-8-gpu.xml");
    assert_int_equal(bg_topology_create(NULL, &live), BG_OK);
    const int live_nodes = bg_topology_summary(live).numa_nodes;
    struct {
        bg_topology_t *topo;
        int node, may_bind;
    } cases[] = {{live, 0, 1}, {live, -1, 0}, {live, live_nodes, 0}, {xml, 1, 0}, {xml, 0, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int bound = -1;
        unsigned char *p = bg_topology_alloc_on_node(cases[i].topo, cases[i].node, BYTES, &bound);
        assert_non_null(p);
        assert_int_equal((uintptr_t)p % 4096, 0);
        if (!cases[i].may_bind) assert_int_equal(bound, 0);
        assert_true(bound == 0 || bound == 1);
        memset(p, 0xA5, BYTES);
        assert_int_equal(p[BYTES - 1], 0xA5);
        bg_topology_free(cases[i].topo, p, BYTES);
        printf("node %d of %s: %s\n", cases[i].node, cases[i].topo == live ? "this machine" : "XML",
               bound ? "bound" : "unbound");
    }
    bg_topology_free(live, NULL, BYTES);
    bg_topology_destroy(live);
    bg_topology_destroy(xml);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_server),       cmocka_unit_test(test_uneven_pcie),
        cmocka_unit_test(test_chained_switches), cmocka_unit_test(test_gpu_links),
        cmocka_unit_test(test_nvlink_switches),  cmocka_unit_test(test_nvlink_pairs),
        cmocka_unit_test(test_cpu_links),        cmocka_unit_test(test_alloc_on_node),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
