/* The CUDA module's loader (lib/cuda/loader.c): what a run on CPU devices
 * calls leaves the module unloaded, and the first question about GPUs
 * loads it in a CUDA build (which every CI build is) or says why there is
 * none. The tests run in order in one process, as loading happens once;
 * the paths where the module is missing or broken are in test_cli.sh. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "backend_cpu.h"
#include "backend_cuda.h"
#include "devices.h"

/* 1 when the module is mapped into this process. */
static int module_mapped(void) {
    FILE *maps = fopen("/proc/self/maps", "r");
    assert_non_null(maps);
    char line[4096];
    int found = 0;
    while (fgets(line, sizeof line, maps) != NULL)
        if (strstr(line, "/libbrigade-cuda.so") != NULL) found = 1;
    fclose(maps);
    return found;
}

static void test_cpu_paths_leave_it_unloaded(void **state) {
    (void)state;
    bg_device_list_t list;
    assert_int_equal(bg_device_list_parse("cpu:2", 2, &list), BG_OK);
    assert_int_equal(list.count, 2);
    assert_int_equal(bg_device_text_gpus("cpu:2"), 0);
    assert_int_equal(bg_device_check_present(&list.devices[0], NULL), BG_OK);
    bg_backend_t *cpu = NULL;
    const bg_cpu_config_t cfg = BG_CPU_CONFIG_INIT;
    assert_int_equal(bg_backend_cpu_create(&cfg, &cpu), BG_OK);
    assert_int_equal(bg_backend_is_cuda(cpu), 0);
    bg_nvtx_push_op("F", 0, 0);
    bg_nvtx_pop();
    assert_int_equal(bg_cuda_clock_mark(NULL), -1);
    cpu->ops->destroy(cpu);
    assert_int_equal(module_mapped(), 0);
}

static void test_gpu_question_loads_it(void **state) {
    (void)state;
    const int gpus = bg_device_text_gpus("auto");
    assert_true(gpus >= 0);
    assert_int_equal(gpus, bg_cuda_device_count());
    const char *absent = bg_cuda_absent_reason();
    if (bg_cuda_built()) {
        if (absent != NULL) fail_msg("a CUDA build whose module does not load: %s", absent);
        assert_int_equal(module_mapped(), 1);
        assert_non_null(strstr(bg_cuda_module_path(), "/lib/libbrigade-cuda.so"));
    } else {
        assert_non_null(absent);
        assert_non_null(strstr(absent, "this build has no CUDA backend"));
        assert_int_equal(module_mapped(), 0);
        assert_int_equal(gpus, 0);
        assert_null(bg_cuda_module_path());
    }
}

/* A GPU that is not there is refused by name, loaded module or not. */
static void test_absent_gpu_is_refused(void **state) {
    (void)state;
    bg_cuda_config_t cfg = BG_CUDA_CONFIG_INIT;
    cfg.device = bg_cuda_device_count();
    bg_backend_t *be = NULL;
    assert_int_not_equal(bg_backend_cuda_create(&cfg, &be), BG_OK);
    assert_null(be);
    char name[16];
    snprintf(name, sizeof name, "cuda:%d", cfg.device);
    assert_non_null(strstr(bg_error_message(), name));
    bg_cuda_device_info_t info;
    assert_int_equal(bg_cuda_device_info(cfg.device, &info), BG_ERR_INVALID);
    assert_int_equal(bg_cuda_peer_rank(cfg.device, cfg.device + 1), -1);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_paths_leave_it_unloaded),
        cmocka_unit_test(test_gpu_question_loads_it),
        cmocka_unit_test(test_absent_gpu_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
