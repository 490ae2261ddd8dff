/* Reading an hwloc XML topology file (--topology, HWLOC_XMLFILE) safely,
 * and saying why hwloc refused one: lib/topology.c's load() uses these
 * around hwloc's own load. Not part of the topology API (topology.h). */
#ifndef BG_TOPOLOGY_XML_H
#define BG_TOPOLOGY_XML_H

#include <stddef.h>

#include "status.h"

/* Refuses, before hwloc reads it whole, what it must not be given: a
 * missing or unreadable file, a directory, anything but a regular file
 * (/dev/zero), or a file over 1 GiB. */
bg_status_t bg_topology_xml_check_file(const char *path);

/* Whether `path` is a regular file, which can be read twice (a pipe's
 * contents would go to the first reader). */
int bg_topology_xml_regular(const char *path);

/* What the probe heard of a file hwloc refused. */
typedef struct bg_topology_xml_heard {
    int heard;       /* 1: the probe ran, and what hwloc said is below */
    char said[2048]; /* hwloc's stderr */
    int said_whole;  /* 0: it was longer, and `said` is its start */
    char where[256]; /* where it is not well-formed XML: "line L, column C: ..." */
} bg_topology_xml_heard_t;

/* hwloc 2.9 (Debian 12's) trusts an XML file's structure, and some files
 * that lstopo would never write crash it while it loads them: a root
 * object with a cpuset but no complete_cpuset, for one (later hwloc
 * releases check that and a few like it). So the file at `path` is loaded
 * first in a child process, as load() will (`pci`: with the PCI devices;
 * `from_env`: as this machine, from HWLOC_XMLFILE), and one that takes the
 * child down (a signal, a sanitizer's exit, 60 s) is refused here rather
 * than taking brigade down. A file hwloc merely refuses passes: load() then
 * fails on it, and `heard` holds what hwloc said of it in the child (its
 * XML reader's verbose words, which it prints only when asked) and, from
 * libxml2 in the child too, where the file is not well-formed XML. Only
 * for a regular file (a pipe's contents would go to the first reader). */
bg_status_t bg_topology_xml_probe(const char *path, int from_env, int pci,
                                  bg_topology_xml_heard_t *heard);

/* Points stderr at /dev/null (while hwloc loads a file whose refusal the
 * probe heard), returning a descriptor of where it went; -1 where it could
 * not, stderr then left as it was. */
int bg_topology_xml_silence_stderr(void);

/* Undoes bg_topology_xml_silence_stderr (nothing for -1). */
void bg_topology_xml_restore_stderr(int kept);

/* Why hwloc refused the XML file at `path`, for its message, into `out`:
 * " (line L, column C: ...)" where it is not well-formed XML (libxml2's
 * words), else " (hwloc: ...)" with the lines of heard->said that say why
 * (cut apart in place), else what such a file should be (hwloc refuses
 * well-formed XML of something else silently). */
void bg_topology_xml_refusal(const char *path, bg_topology_xml_heard_t *heard, char *out,
                             size_t size);

#endif /* BG_TOPOLOGY_XML_H */
