/* Device strings and the hwloc topology. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices.h"
#include "topology.h"

static void test_cpu_lists(void **state) {
    (void)state;
    bg_device_list_t list;
    assert_int_equal(bg_device_list_parse("cpu", 2, &list), BG_OK);
    assert_int_equal(list.count, 1);
    assert_string_equal(list.devices[0].name, "cpu:0");
    assert_int_equal(bg_device_list_parse("cpu:3", 2, &list), BG_OK);
    assert_int_equal(list.count, 3);
    assert_int_equal(list.devices[2].kind, BG_DEVICE_CPU);
    assert_int_equal(list.devices[2].physical, 0); /* wraps around two cores */
    assert_string_equal(list.devices[2].name, "cpu:2");
    assert_int_equal(bg_device_list_parse("auto", 4, &list), BG_OK);
    assert_int_equal(list.count, 4);
    assert_int_equal(list.devices[3].physical, 3);
}

static void test_cuda_lists(void **state) {
    (void)state;
    bg_device_list_t list;
    assert_int_equal(bg_device_list_parse("cuda:0,cuda:1", 2, &list), BG_OK);
    assert_int_equal(list.count, 2);
    assert_int_equal(list.devices[1].kind, BG_DEVICE_CUDA);
    assert_int_equal(list.devices[1].physical, 1);
    assert_int_equal(bg_device_list_parse("cuda:0x4", 2, &list), BG_OK);
    assert_int_equal(list.count, 4);
    assert_int_equal(list.devices[3].physical, 0);
    assert_string_equal(list.devices[3].name, "cuda:0/3");
    char words[160];
    assert_string_equal(bg_device_list_words(&list, words, sizeof words),
                        "cuda:0/0, cuda:0/1, cuda:0/2, cuda:0/3");
    assert_int_equal(bg_device_list_parse("cuda:0x4,cuda:1", 2, &list), BG_OK);
    assert_string_equal(bg_device_list_words(&list, words, sizeof words),
                        "cuda:0/0, cuda:0/1, ..., cuda:1 (5 devices)");
    bg_device_list_reverse(&list);
    assert_string_equal(list.devices[0].name, "cuda:1");
    assert_string_equal(list.devices[2].name, "cuda:0/2"); /* the middle stays */
    assert_string_equal(list.devices[4].name, "cuda:0/0");
    assert_string_equal(bg_device_list_words(&list, words, 12), "cuda:1, cud"); /* cut */
}

static void expect_bad(const char *text, const char *needle) {
    bg_device_list_t list = {.count = 99};
    assert_int_equal(bg_device_list_parse(text, 2, &list), BG_ERR_INVALID);
    assert_int_equal(list.count, 99); /* untouched */
    if (strstr(bg_error_message(), needle) == NULL)
        fail_msg("'%s': message '%s' lacks '%s'", text, bg_error_message(), needle);
}

static void test_bad_lists(void **state) {
    (void)state;
    expect_bad("gpu", "'gpu' is not a device list");
    expect_bad("cpu:0", "expected cpu:N");
    expect_bad("cpu:x", "expected cpu:N");
    expect_bad("cpu:257", "expected cpu:N");
    expect_bad("cpu:2,cpu:3", "expected cpu:N");
    expect_bad("cuda:", "'cuda:' is not a GPU");
    expect_bad("cuda:0x", "'cuda:0x' is not a GPU");
    expect_bad("cuda:0x0", "is not a GPU");
    expect_bad("cuda:0,", "ends with a comma");
    expect_bad("cuda:0,gpu:1", "'gpu:1' is not a GPU");
    /* Two commas together: said so (until 2026-12-05 "'' is not a GPU"). */
    expect_bad("cuda:0,,cuda:1", "'cuda:0,,cuda:1' has an empty entry (two commas together)");
    /* A GPU listed again: its virtual devices of both entries together
     * (until 2026-12-05 always "x2", here what was written already). */
    expect_bad("cuda:0x2,cuda:0", "GPU 0 is listed twice in 'cuda:0x2,cuda:0' (for several "
                                  "stages on one GPU, write cuda:0x3)");
    expect_bad("cuda:0,cuda:0,cuda:1,cuda:0x2", "write cuda:0x4)");
    expect_bad("cuda:0x300", "is not a GPU");
    expect_bad("cuda:0x257", "V the stages it holds from 1 to 256)");
    expect_bad("cuda:256", "G a GPU's number from 0 to 255");
    expect_bad("cuda:0x200,cuda:1x100", "more than 256 devices");
}

static void test_topology_from_xml(void **state) {
    (void)state;
    const char *root = getenv("BRIGADE_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/two-socket-8-core.xml", root ? root : ".");
    bg_topology_t *t = NULL;
    bg_status_t st = bg_topology_create(path, &t);
    if (st != BG_OK) fail_msg("%s", bg_error_message());
    assert_int_equal(bg_topology_core_count(t), 8);
    bg_topology_summary_t sum = bg_topology_summary(t);
    assert_int_equal(sum.packages, 2);
    assert_int_equal(sum.numa_nodes, 2);
    assert_int_equal(sum.pus, 16);
    /* The fixture gives each NUMA node local_memory="1073741824" (1 GiB). */
    assert_int_equal(bg_topology_numa_memory(t, 0), UINT64_C(1073741824));
    assert_int_equal(bg_topology_numa_memory(t, 1), UINT64_C(1073741824));
    assert_int_equal(bg_topology_numa_memory(t, 2), 0); /* no third node */
    assert_int_equal(sum.memory_bytes, UINT64_C(2147483648));
    for (int core = 0; core < 8; core++) {
        assert_int_equal(bg_topology_core_package(t, core), core / 4);
        assert_int_equal(bg_topology_core_numa(t, core), core / 4);
    }
    assert_int_equal(bg_topology_gpu_count(t), 0);
    /* Binding needs the live machine. */
    assert_int_equal(bg_topology_bind_thread(t, 0), BG_ERR_UNSUPPORTED);
    bg_topology_destroy(t);
    bg_topology_destroy(NULL);

    assert_int_equal(bg_topology_create("/nonexistent/topology.xml", &t), BG_ERR_INVALID);
    assert_non_null(strstr(bg_error_message(), "/nonexistent/topology.xml"));
}

static void test_topology_live(void **state) {
    (void)state;
    bg_topology_t *t = NULL;
    assert_int_equal(bg_topology_create(NULL, &t), BG_OK);
    assert_true(bg_topology_core_count(t) >= 1);
    /* Containers may refuse binding; either way the call answers cleanly. */
    bg_status_t st = bg_topology_bind_thread(t, 0);
    assert_true(st == BG_OK || st == BG_ERR_UNSUPPORTED);
    bg_topology_destroy(t);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_lists),     cmocka_unit_test(test_cuda_lists),
        cmocka_unit_test(test_bad_lists),     cmocka_unit_test(test_topology_from_xml),
        cmocka_unit_test(test_topology_live),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
