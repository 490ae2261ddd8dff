/* The memory the system gives processes, which in a container or a
 * virtual machine can differ from what its NUMA nodes report. */
#ifndef BG_HOST_MEMORY_H
#define BG_HOST_MEMORY_H

#include <stdint.h>
#include <unistd.h>

/* Bytes, or 0 where the system does not say. */
static inline uint64_t bg_host_memory_bytes(void) {
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    return pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page : 0;
}

#endif /* BG_HOST_MEMORY_H */
