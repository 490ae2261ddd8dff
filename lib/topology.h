/* The machine's topology through hwloc: how many cores there are, and
 * binding a stage's worker thread to its own core. Loaded from the live
 * machine or from an hwloc XML export (so a machine we do not have can be
 * described); binding works only on the live machine. */
#ifndef BG_TOPOLOGY_H
#define BG_TOPOLOGY_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct bg_topology bg_topology_t;

/* Loads the topology of this machine (xml_path NULL) or of an hwloc XML file
 * (BG_ERR_INVALID naming the file if hwloc cannot read it). */
bg_status_t bg_topology_create(const char *xml_path, bg_topology_t **out);

/* NULL is a no-op. */
void bg_topology_destroy(bg_topology_t *topo);

/* Physical cores (processing units when hwloc reports no cores); >= 1. */
int bg_topology_core_count(const bg_topology_t *topo);

/* Binds the calling thread to core `core % core_count`. BG_ERR_UNSUPPORTED
 * when binding is impossible (an XML topology, or the system refuses), so the
 * caller can decide to run unbound. Thread-safe. */
bg_status_t bg_topology_bind_thread(bg_topology_t *topo, int core);

#ifdef __cplusplus
}
#endif

#endif /* BG_TOPOLOGY_H */
