#include "backend_cpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sys/mman.h>

#include <cblas.h>

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

#include "alloc.h"
#include "backend_cpu_impl.h"

/* Alignment of every allocation: a cache line, and enough for AVX-512 loads.
 * Allocations of a huge page or more are aligned to huge pages and marked
 * for them: a training step streams over tens of megabytes of activations,
 * parameters and optimizer state, and with 4 KiB pages the TLB misses on
 * every page. */
enum { CPU_ALIGNMENT = 64, CPU_HUGE_PAGE = 2 << 20 };

typedef struct bg_cpu_backend {
    bg_backend_t base;
    int nonfinite_mark; /* lowest tag a scan marked; -1 for none */
    double loss_sum;    /* the loss totals since the last take_loss */
    int64_t correct;
} bg_cpu_backend_t;

void bg_cpu_destroy(bg_backend_t *be) { free(be); }

bg_status_t bg_cpu_alloc(bg_backend_t *be, size_t bytes, void **out) {
    size_t align = bytes >= CPU_HUGE_PAGE ? CPU_HUGE_PAGE : CPU_ALIGNMENT;
    if (bytes > SIZE_MAX - align)
        return bg_error_set(BG_ERR_NOMEM, "%s: %zu bytes is more than memory can hold", be->name,
                            bytes);
    size_t rounded = (bytes + align - 1) / align * align;
    if (rounded == 0) rounded = CPU_ALIGNMENT;
    void *ptr = bg_aligned_alloc(align, rounded);
    if (ptr == NULL)
        return bg_error_set(BG_ERR_NOMEM, "%s: out of memory allocating %zu bytes", be->name,
                            bytes);
#ifdef MADV_HUGEPAGE
    /* Only advice: where huge pages are off or unavailable, nothing changes. */
    if (align == CPU_HUGE_PAGE) (void)madvise(ptr, rounded, MADV_HUGEPAGE);
#endif
    memset(ptr, 0, rounded);
    *out = ptr;
    return BG_OK;
}

void bg_cpu_free(bg_backend_t *be, void *ptr) {
    (void)be;
    free(ptr);
}

bg_status_t bg_cpu_transfer(bg_backend_t *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes > 0) memcpy(dst, src, bytes);
    return BG_OK;
}

bg_status_t bg_cpu_synchronize(bg_backend_t *be) {
    (void)be;
    return BG_OK;
}

void bg_cpu_lower_nonfinite_mark(bg_backend_t *be, int tag) {
    bg_cpu_backend_t *cpu = (bg_cpu_backend_t *)be;
    if (cpu->nonfinite_mark < 0 || tag < cpu->nonfinite_mark) cpu->nonfinite_mark = tag;
}

void bg_cpu_add_loss(bg_backend_t *be, double loss_sum, int64_t correct) {
    bg_cpu_backend_t *cpu = (bg_cpu_backend_t *)be;
    cpu->loss_sum += loss_sum;
    cpu->correct += correct;
}

bg_status_t bg_cpu_take_loss(bg_backend_t *be, double *loss_sum, int64_t *correct) {
    bg_cpu_backend_t *cpu = (bg_cpu_backend_t *)be;
    *loss_sum = cpu->loss_sum;
    *correct = cpu->correct;
    cpu->loss_sum = 0;
    cpu->correct = 0;
    return BG_OK;
}

bg_status_t bg_cpu_take_nonfinite(bg_backend_t *be, int *tag) {
    bg_cpu_backend_t *cpu = (bg_cpu_backend_t *)be;
    *tag = cpu->nonfinite_mark;
    cpu->nonfinite_mark = -1;
    return BG_OK;
}

/* Sets the calling thread's floating point to flush subnormal results to 0
 * and to read subnormal inputs as 0. Optimizer state decays toward them
 * (Adam's m shrinks by beta1 each step in which a weight's gradient is 0, a
 * dead unit's), and an op on a subnormal can cost a hundred cycles: the
 * origin CNN's Adam update took up to ten times as long once its m reached
 * them (docs/training.md, "Subnormal floats"). What they hold is far below
 * anything a training step adds. Elsewhere than x86 and 64-bit Arm this
 * does nothing. */
static void flush_subnormals(void) {
#if defined(__SSE__)
    _MM_SET_FLUSH_ZERO_MODE(_MM_FLUSH_ZERO_ON);
    _mm_setcsr(_mm_getcsr() | 0x0040); /* DAZ: subnormal inputs read as 0 */
#elif defined(__aarch64__)
    uint64_t fpcr;
    __asm__ volatile("mrs %0, fpcr" : "=r"(fpcr));
    fpcr |= UINT64_C(1) << 24; /* FZ: flushes inputs and results alike */
    __asm__ volatile("msr fpcr, %0" : : "r"(fpcr));
#endif
}

bg_status_t bg_backend_cpu_create(const bg_cpu_config_t *cfg, bg_backend_t **out) {
    if (cfg->dtype != BG_F32 && cfg->dtype != BG_F64)
        return bg_error_set(BG_ERR_INVALID, "cpu backend: unknown element type %d",
                            (int)cfg->dtype);
    bg_cpu_backend_t *cpu = bg_calloc(1, sizeof *cpu);
    if (cpu == NULL) return bg_error_set(BG_ERR_NOMEM, "cpu backend: out of memory");
    cpu->nonfinite_mark = -1;
    cpu->base.ops = cfg->dtype == BG_F64 ? &bg_cpu_ops_f64 : &bg_cpu_ops_f32;
    cpu->base.dtype = cfg->dtype;
    snprintf(cpu->base.name, sizeof cpu->base.name, "cpu:%d", cfg->index);
    /* A CPU device is one core: OpenBLAS must not spread a stage's GEMMs over
     * the cores that the other stages run on. */
    openblas_set_num_threads(1);
    flush_subnormals();
    *out = &cpu->base;
    return BG_OK;
}
