/* backend_cuda.h's functions on brigade's side: each calls the CUDA module
 * (lib/cuda/module.h), which is loaded the first time a function that
 * looks for GPUs is called: bg_backend_cuda_create, bg_cuda_device_count,
 * bg_cuda_device_info and bg_cuda_peer_rank. The rest take a CUDA backend,
 * slot or clock, which only a loaded module makes, or answer "not CUDA"
 * and do nothing while none is loaded (bg_backend_is_cuda, the NVTX
 * ranges), so a run on CPU devices never loads it.
 *
 * Where the module is looked for, first found first:
 *   $BRIGADE_CUDA_MODULE, a path (a test's or a packager's choice);
 *   ../lib/libbrigade-cuda.so from the running program's folder, which is
 *     where the build puts it for cli/, tests/ and bench/;
 *   ../LIBDIR/brigade/ from the program's folder (an install, moved or not);
 *   LIBDIR/brigade/ of the prefix meson installed into.
 * A module that is there but cannot be loaded (its CUDA libraries are
 * missing) ends the search; why is kept for the errors below. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "module.h"

/* From lib/meson.build: whether the module is built, and where it is
 * installed (absolute, and relative to the install's prefix). */
#ifndef BG_HAVE_CUDA
#define BG_HAVE_CUDA 0
#endif
#ifndef BG_CUDA_MODULE_DIR
#define BG_CUDA_MODULE_DIR "/usr/local/lib/brigade"
#endif
#ifndef BG_CUDA_MODULE_SUBDIR
#define BG_CUDA_MODULE_SUBDIR "lib/brigade"
#endif

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
/* NULL until loaded, and when it cannot be. Written once, inside
 * pthread_once; read with acquire loads (current()) by the functions that
 * never load, which any thread may call meanwhile. */
static const bg_cuda_module_t *module;
static char why_absent[3 * PATH_MAX];    /* why it is NULL, once load() has run */
static char loaded_from[PATH_MAX + 128]; /* the module's path, once loaded */

static const bg_cuda_module_t *current(void) { return __atomic_load_n(&module, __ATOMIC_ACQUIRE); }

static const bg_cuda_host_t host = {
    .error_set = bg_error_set,
    .error_clear = bg_error_clear,
    .arena_reserve = bg_arena_reserve,
};

/* Loads the module at `path`: 1 when it is loaded, or when it is there but
 * cannot be (why_absent says why); 0 when there is no file. */
static int load_from(const char *path) {
    if (access(path, F_OK) != 0) return 0;
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        snprintf(why_absent, sizeof why_absent, "the CUDA backend %s cannot be loaded: %s", path,
                 dlerror());
        return 1;
    }
    /* A data pointer to a function pointer: POSIX's dlsym needs it. */
    bg_cuda_module_open_fn open;
    void *symbol = dlsym(handle, BG_CUDA_MODULE_OPEN);
    memcpy(&open, &symbol, sizeof open);
    const bg_cuda_module_t *opened = open != NULL ? open(&host, bg_cuda_module_abi()) : NULL;
    __atomic_store_n(&module, opened, __ATOMIC_RELEASE);
    if (opened != NULL) {
        /* Without the ../ of the search, where it resolves. */
        char *resolved = realpath(path, NULL);
        snprintf(loaded_from, sizeof loaded_from, "%s", resolved != NULL ? resolved : path);
        free(resolved);
    }
    if (opened == NULL) {
        if (open == NULL)
            snprintf(why_absent, sizeof why_absent,
                     "%s is not brigade's CUDA backend (it has no %s)", path, BG_CUDA_MODULE_OPEN);
        else
            snprintf(why_absent, sizeof why_absent,
                     "the CUDA backend %s is from another build of brigade (rebuild it with "
                     "this one)",
                     path);
        dlclose(handle);
    }
    /* A loaded module stays loaded: its backends may live to the end. */
    return 1;
}

/* The folder of the running program, without a trailing slash; 0 when
 * /proc does not say. */
static int program_folder(char *out, size_t size) {
    ssize_t n = readlink("/proc/self/exe", out, size - 1);
    if (n <= 0 || (size_t)n >= size - 1) return 0;
    out[n] = '\0';
    char *slash = strrchr(out, '/');
    if (slash == NULL) return 0;
    *slash = '\0';
    return 1;
}

static void load(void) {
    if (!BG_HAVE_CUDA) {
        snprintf(why_absent, sizeof why_absent,
                 "this build has no CUDA backend (configure with -Dcuda=enabled on a machine "
                 "with nvcc)");
        return;
    }
    const char *chosen = getenv("BRIGADE_CUDA_MODULE");
    if (chosen != NULL && chosen[0] != '\0') {
        /* dlopen would search the library path for a bare name. */
        if (strchr(chosen, '/') == NULL)
            snprintf(why_absent, sizeof why_absent,
                     "BRIGADE_CUDA_MODULE is '%s', not a path (write ./%s for one in this folder)",
                     chosen, chosen);
        else if (!load_from(chosen))
            snprintf(why_absent, sizeof why_absent,
                     "BRIGADE_CUDA_MODULE names %s, which does not exist", chosen);
        return;
    }
    /* The build's lib/, then the install's module folder relative to the
     * program's (a moved install), then where it was installed. */
    const char *const beside[] = {"lib", BG_CUDA_MODULE_SUBDIR};
    char folder[PATH_MAX], path[PATH_MAX + 128];
    const int found_folder = program_folder(folder, sizeof folder);
    if (found_folder)
        for (size_t i = 0; i < sizeof beside / sizeof beside[0]; i++) {
            snprintf(path, sizeof path, "%s/../%s/%s", folder, beside[i], BG_CUDA_MODULE_FILE);
            if (load_from(path)) return;
        }
    snprintf(path, sizeof path, "%s/%s", BG_CUDA_MODULE_DIR, BG_CUDA_MODULE_FILE);
    if (load_from(path)) return;
    /* The folders searched, by name (the program's folder's parent), after
     * the remedy, which a long path would otherwise push out of a message. */
    char *slash = found_folder ? strrchr(folder, '/') : NULL;
    if (slash != NULL) *slash = '\0';
    const char *parent = slash != NULL ? folder : "..";
    snprintf(why_absent, sizeof why_absent,
             "the CUDA backend was built but %s was not found (set BRIGADE_CUDA_MODULE to its "
             "path): not in %s/lib or %s/%s (%s this program's folder), nor in %s",
             BG_CUDA_MODULE_FILE, parent, parent, BG_CUDA_MODULE_SUBDIR,
             slash != NULL ? "beside" : "from", BG_CUDA_MODULE_DIR);
}

/* The module, loading it on the first call; NULL when there is none. */
static const bg_cuda_module_t *loaded(void) {
    pthread_once(&load_once, load);
    return current();
}

int bg_cuda_built(void) { return BG_HAVE_CUDA; }

const char *bg_cuda_absent_reason(void) { return loaded() == NULL ? why_absent : NULL; }

const char *bg_cuda_module_path(void) { return loaded() != NULL ? loaded_from : NULL; }

bg_status_t bg_backend_cuda_create(const bg_cuda_config_t *cfg, bg_backend_t **out) {
    const bg_cuda_module_t *m = loaded();
    if (m == NULL) return bg_error_set(BG_ERR_UNSUPPORTED, "cuda:%d: %s", cfg->device, why_absent);
    return m->backend_create(cfg, out);
}

int bg_cuda_device_count(void) {
    const bg_cuda_module_t *m = loaded();
    return m != NULL ? m->device_count() : 0;
}

const char *bg_cuda_no_device_reason(void) {
    const bg_cuda_module_t *m = loaded();
    return m != NULL ? m->no_device_reason() : NULL;
}

bg_status_t bg_cuda_device_info(int device, bg_cuda_device_info_t *out) {
    const bg_cuda_module_t *m = loaded();
    if (m == NULL)
        return bg_error_set(BG_ERR_INVALID, "cuda:%d: no such GPU: %s", device, why_absent);
    return m->device_info(device, out);
}

int bg_cuda_peer_rank(int a, int b) {
    const bg_cuda_module_t *m = loaded();
    return m != NULL ? m->peer_rank(a, b) : -1;
}

/* The functions below never load the module. Those that take a backend,
 * slot or clock are called with one only the module makes, so `module` is
 * set; the check keeps a wrong call an error instead of a crash. */

static bg_status_t not_loaded(const char *function) {
    return bg_error_set(BG_ERR_INTERNAL, "%s: no CUDA backend is loaded", function);
}

int bg_backend_is_cuda(const bg_backend_t *be) {
    const bg_cuda_module_t *m = current();
    return m != NULL && m->backend_is_cuda(be);
}

bg_status_t bg_cuda_slot_create(bg_backend_t *receiver, size_t bytes, void *staging,
                                bg_arena_t *arena, int lane, bg_cuda_slot_t **out) {
    const bg_cuda_module_t *m = current();
    if (m == NULL) return not_loaded(__func__);
    return m->slot_create(receiver, bytes, staging, arena, lane, out);
}

void bg_cuda_slot_destroy(bg_cuda_slot_t *slot) {
    const bg_cuda_module_t *m = current();
    if (m != NULL) m->slot_destroy(slot);
}

bg_status_t bg_cuda_slot_fill(bg_cuda_slot_t *slot, bg_backend_t *sender, const void *src,
                              size_t bytes, bg_cuda_clock_t *link, bg_cuda_clock_t *leg1,
                              int marks[2]) {
    const bg_cuda_module_t *m = current();
    if (m == NULL) return not_loaded(__func__);
    return m->slot_fill(slot, sender, src, bytes, link, leg1, marks);
}

bg_status_t bg_cuda_slot_wait_read(bg_cuda_slot_t *slot, bg_backend_t *sender) {
    const bg_cuda_module_t *m = current();
    if (m == NULL) return not_loaded(__func__);
    return m->slot_wait_read(slot, sender);
}

bg_status_t bg_cuda_slot_drain(bg_cuda_slot_t *slot, void **dst, size_t bytes, size_t capacity,
                               bg_cuda_clock_t *clock, int *arrived) {
    const bg_cuda_module_t *m = current();
    if (m == NULL) return not_loaded(__func__);
    return m->slot_drain(slot, dst, bytes, capacity, clock, arrived);
}

bg_status_t bg_cuda_enable_peer_access(bg_backend_t *a, bg_backend_t *b, int *direct) {
    const bg_cuda_module_t *m = current();
    if (m == NULL) return not_loaded(__func__);
    return m->enable_peer_access(a, b, direct);
}

bg_status_t bg_cuda_clock_create(bg_backend_t *be, int lane, int capacity, bg_cuda_clock_t **out) {
    const bg_cuda_module_t *m = current();
    if (m == NULL) return not_loaded(__func__);
    return m->clock_create(be, lane, capacity, out);
}

void bg_cuda_clock_destroy(bg_cuda_clock_t *clock) {
    const bg_cuda_module_t *m = current();
    if (m != NULL) m->clock_destroy(clock);
}

bg_status_t bg_cuda_clock_restart(bg_cuda_clock_t *clock, double *host_zero) {
    const bg_cuda_module_t *m = current();
    if (m == NULL) return not_loaded(__func__);
    return m->clock_restart(clock, host_zero);
}

int bg_cuda_clock_mark(bg_cuda_clock_t *clock) {
    const bg_cuda_module_t *m = current();
    return m != NULL ? m->clock_mark(clock) : -1;
}

bg_status_t bg_cuda_clock_seconds(bg_cuda_clock_t *clock, int index, double *out) {
    const bg_cuda_module_t *m = current();
    if (m == NULL) return not_loaded(__func__);
    return m->clock_seconds(clock, index, out);
}

void bg_nvtx_push_op(const char *kind, int microbatch, int stage) {
    const bg_cuda_module_t *m = current();
    if (m != NULL) m->nvtx_push_op(kind, microbatch, stage);
}

void bg_nvtx_pop(void) {
    const bg_cuda_module_t *m = current();
    if (m != NULL) m->nvtx_pop();
}
