/* The chain's direction: where a plan does not fit, the same devices the
 * other way round (stages/planner.h). */
#include <stdlib.h>

#include "planner.h"

int bg_plan_capacities_mirrored(const bg_cost_device_t *device, int k) {
    for (int a = 0; a < k / 2; a++) {
        const bg_cost_device_t *d = &device[a], *e = &device[k - 1 - a];
        if (d->memory_bytes != e->memory_bytes || d->own_conv_workspace != e->own_conv_workspace ||
            d->conv_workspace_bytes != e->conv_workspace_bytes)
            return 0;
    }
    return 1;
}

int bg_plan_may_fit_reversed(const bg_plan_t *plan) {
    const bg_plan_request_t *r = &plan->request;
    return !plan->partition->fits && r->chunks == 1 && r->devices >= 2 &&
           !bg_plan_capacities_mirrored(r->device, r->devices);
}

void bg_plan_request_reverse(const bg_plan_request_t *r, bg_cost_device_t *device,
                             bg_cost_link_t *links, bg_plan_request_t *out) {
    const int k = r->devices;
    *out = *r;
    for (int a = 0; a < k; a++) {
        device[a] = r->device[k - 1 - a];
        for (int b = 0; r->links != NULL && b < k; b++)
            links[a * k + b] = r->links[(k - 1 - a) * k + (k - 1 - b)];
    }
    out->device = device;
    out->links = r->links != NULL ? links : NULL;
    out->path_device = NULL;
    out->path_links = NULL;
}

bg_status_t bg_plan_create_either_way(const bg_plan_request_t *r, bg_plan_t **out, int *reversed) {
    bg_plan_t *plan = NULL;
    BG_CHECK(bg_plan_create(r, &plan));
    if (!bg_plan_may_fit_reversed(plan)) {
        *out = plan;
        *reversed = 0;
        return BG_OK;
    }
    const size_t k = (size_t)r->devices;
    bg_cost_device_t *device = malloc(sizeof *device * k);
    bg_cost_link_t *links = r->links != NULL ? malloc(sizeof *links * k * k) : NULL;
    bg_plan_t *other = NULL;
    bg_status_t st = BG_OK;
    if (device == NULL || (r->links != NULL && links == NULL)) {
        st = bg_error_set(BG_ERR_NOMEM, "planner: out of memory");
    } else {
        bg_plan_request_t v;
        bg_plan_request_reverse(r, device, links, &v);
        st = bg_plan_create(&v, &other);
    }
    free(device); /* the plan keeps copies */
    free(links);
    const int kept = st == BG_OK && other->partition->fits;
    if (kept) {
        bg_plan_destroy(plan);
        plan = other;
    } else {
        bg_plan_destroy(other);
    }
    if (st != BG_OK && st != BG_ERR_INVALID) { /* refused the other way: as it was */
        bg_plan_destroy(plan);
        return st;
    }
    *out = plan;
    *reversed = kept;
    return BG_OK;
}
