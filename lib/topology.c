#include "topology.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <hwloc.h>

struct bg_topology {
    hwloc_topology_t hw;
    int from_xml;
    int cores;
    hwloc_obj_type_t core_type; /* HWLOC_OBJ_CORE, or HWLOC_OBJ_PU without cores */
};

bg_status_t bg_topology_create(const char *xml_path, bg_topology_t **out) {
    bg_topology_t *t = calloc(1, sizeof *t);
    if (t == NULL) return bg_error_set(BG_ERR_NOMEM, "topology: out of memory");
    if (hwloc_topology_init(&t->hw) != 0) {
        free(t);
        return bg_error_set(BG_ERR_INTERNAL, "hwloc_topology_init failed");
    }
    bg_status_t st = BG_OK;
    if (xml_path != NULL && hwloc_topology_set_xml(t->hw, xml_path) != 0) {
        st = bg_error_set(BG_ERR_INVALID, "%s: not a readable hwloc XML topology (%s)", xml_path,
                          strerror(errno));
        goto fail;
    }
    if (hwloc_topology_load(t->hw) != 0) {
        st = bg_error_set(xml_path ? BG_ERR_INVALID : BG_ERR_INTERNAL,
                          "%s: hwloc could not load the topology (%s)",
                          xml_path ? xml_path : "this machine", strerror(errno));
        goto fail;
    }
    t->from_xml = xml_path != NULL;
    t->core_type = HWLOC_OBJ_CORE;
    t->cores = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_CORE);
    if (t->cores < 1) {
        t->core_type = HWLOC_OBJ_PU;
        t->cores = hwloc_get_nbobjs_by_type(t->hw, HWLOC_OBJ_PU);
    }
    if (t->cores < 1) t->cores = 1;
    *out = t;
    return BG_OK;
fail:
    hwloc_topology_destroy(t->hw);
    free(t);
    return st;
}

void bg_topology_destroy(bg_topology_t *t) {
    if (t == NULL) return;
    hwloc_topology_destroy(t->hw);
    free(t);
}

int bg_topology_core_count(const bg_topology_t *t) { return t->cores; }

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
