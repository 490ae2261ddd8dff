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

/* hwloc 2.9 (Debian 12's) trusts an XML file's structure, and some files
 * that lstopo would never write crash it while it loads them: a root
 * object with a cpuset but no complete_cpuset, for one (later hwloc
 * releases check that and a few like it). So a file is loaded first in a
 * child process, as load() will (`pci`: with the PCI devices), and one
 * that takes the child down (a signal, or a sanitizer's exit) is refused
 * here rather than taking brigade down; `what` names the file in that
 * message. A file hwloc merely refuses passes: load() then fails on it,
 * and what hwloc said of it in the child (its XML reader's verbose words,
 * which it prints only when asked, and the rest of its stderr) is in
 * `said`, with *heard 1 where all of it was heard. `xml_path` NULL: this
 * machine as hwloc reads it (HWLOC_XMLFILE). Only for a regular file. */
bg_status_t bg_topology_xml_probe(const char *xml_path, const char *what, int pci, char *said,
                                  size_t said_size, int *heard);

/* Points stderr at /dev/null (while hwloc loads a file whose refusal the
 * probe heard), returning a descriptor of where it went; -1 where it could
 * not, stderr then left as it was. */
int bg_topology_xml_silence_stderr(void);

/* Undoes bg_topology_xml_silence_stderr (nothing for -1). */
void bg_topology_xml_restore_stderr(int kept);

/* Why hwloc refused the XML file at `path`, for its message, into `out`:
 * " (line L, column C: ...)" where it is not well-formed XML (libxml2's
 * words), else " (hwloc: ...)" with the lines of `said` (the probe's; cut
 * apart in place) that say why, else "". */
void bg_topology_xml_refusal(const char *path, char *said, char *out, size_t size);

#endif /* BG_TOPOLOGY_XML_H */
