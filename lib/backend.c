#include "backend.h"

#include <stdlib.h>

#include "alloc.h"

void bg_backend_destroy(bg_backend_t *be) {
    if (be != NULL) be->ops->destroy(be);
}

bg_status_t bg_backend_alloc_elems(bg_backend_t *be, int64_t count, void **out) {
    if (count < 0)
        return bg_error_set(BG_ERR_INTERNAL, "%s: negative allocation (%lld elements)", be->name,
                            (long long)count);
    return be->ops->alloc(be, bg_backend_bytes(be, count), out);
}

/* Converts through a host buffer in the backend's type, so callers can work
 * in double whatever the device stores. */
bg_status_t bg_backend_upload_doubles(bg_backend_t *be, void *dst, const double *src,
                                      int64_t count) {
    if (be->dtype == BG_F64) return be->ops->upload(be, dst, src, bg_backend_bytes(be, count));
    float *tmp = bg_malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    if (tmp == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", be->name);
    for (int64_t i = 0; i < count; i++) tmp[i] = (float)src[i];
    bg_status_t st = be->ops->upload(be, dst, tmp, bg_backend_bytes(be, count));
    free(tmp);
    return st;
}

bg_status_t bg_backend_download_doubles(bg_backend_t *be, double *dst, const void *src,
                                        int64_t count) {
    if (be->dtype == BG_F64) return be->ops->download(be, dst, src, bg_backend_bytes(be, count));
    float *tmp = bg_malloc(sizeof(float) * (size_t)(count > 0 ? count : 1));
    if (tmp == NULL) return bg_error_set(BG_ERR_NOMEM, "%s: out of memory", be->name);
    bg_status_t st = be->ops->download(be, tmp, src, bg_backend_bytes(be, count));
    for (int64_t i = 0; st == BG_OK && i < count; i++) dst[i] = tmp[i];
    free(tmp);
    return st;
}
