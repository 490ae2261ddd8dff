/* Reading an hwloc XML topology file safely, and saying why hwloc refused
 * one (topology_xml.h). */
#include "topology_xml.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <hwloc.h>
#include <libxml/parser.h>
#include <libxml/xmlerror.h>

/* Where the file at `path` is not well-formed XML, found with libxml2 (no
 * network, no DTD, its limits on depth and entity expansion kept), for
 * files hwloc's own XML reader refused without saying where: "line L,
 * column C: what" (libxml2's words, their first letter lower-case) into
 * `out`, and true; else (well-formed, past a limit, or the file cannot be
 * read) false, `out` empty. Run in the probe's child, under its alarm. */
static bool xml_problem(const char *path, char *out, size_t size) {
    if (size > 0) out[0] = '\0';
    xmlInitParser();
    /* Silent: the error is read back below, not printed by libxml2. */
    const int options = XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING;
    xmlResetLastError();
    xmlDocPtr doc = xmlReadFile(path, NULL, options);
    if (doc != NULL) {
        xmlFreeDoc(doc);
        return false;
    }
    const xmlError *error = xmlGetLastError();
    /* A file that could not be opened is not a malformed one; nor is one
     * past one of libxml2's limits (a depth of 256, a text of 10 MB: each
     * message names the option that lifts it), which hwloc may read. */
    if (error == NULL || error->message == NULL || error->domain == XML_FROM_IO ||
        error->code == XML_ERR_INTERNAL_ERROR || strstr(error->message, "XML_PARSE_HUGE") ||
        error->line < 1 || size == 0)
        return false;
    int n = snprintf(out, size, "line %d, column %d: %s", error->line, error->int2, error->message);
    if (n < 0) {
        out[0] = '\0';
        return false;
    }
    size_t length = strlen(out);
    while (length > 0 && isspace((unsigned char)out[length - 1])) out[--length] = '\0';
    /* After the position, libxml2's sentence reads on from the colon. */
    char *what = strstr(out, ": ");
    if (what != NULL && isupper((unsigned char)what[2]) && islower((unsigned char)what[3]))
        what[2] = (char)tolower((unsigned char)what[2]);
    return true;
}

/* hwloc reads an XML file whole, with no limit: a device (/dev/zero) or a
 * huge file would take all memory. Only regular files up to this size. */
#define TOPOLOGY_XML_MAX_BYTES ((off_t)1 << 30)

bg_status_t bg_topology_xml_check_file(const char *path) {
    struct stat info;
    if (stat(path, &info) != 0)
        return bg_error_set(BG_ERR_INVALID, "%s: not a readable hwloc XML topology (%s)", path,
                            strerror(errno));
    if (S_ISDIR(info.st_mode))
        return bg_error_set(BG_ERR_INVALID, "%s: is a directory, not an hwloc XML topology", path);
    if (!S_ISREG(info.st_mode))
        return bg_error_set(BG_ERR_INVALID,
                            "%s: not a regular file (brigade reads a topology from an hwloc XML "
                            "file, as lstopo --of xml writes it)",
                            path);
    if (info.st_size > TOPOLOGY_XML_MAX_BYTES)
        return bg_error_set(BG_ERR_INVALID,
                            "%s: %lld bytes, more than the %lld an hwloc XML topology may have",
                            path, (long long)info.st_size, (long long)TOPOLOGY_XML_MAX_BYTES);
    /* hwloc says nothing of why it cannot open a file. */
    if (access(path, R_OK) != 0)
        return bg_error_set(BG_ERR_INVALID, "%s: not a readable hwloc XML topology (%s)", path,
                            strerror(errno));
    return BG_OK;
}

int bg_topology_xml_regular(const char *path) {
    struct stat info;
    return stat(path, &info) == 0 && S_ISREG(info.st_mode);
}

enum { PROBE_LOADED = 0, PROBE_REFUSED = 3, PROBE_SECONDS = 60 };

/* Reads `fd` to its end into `out` (size bytes, terminated; the rest is
 * read and dropped, so that the writer never blocks), then closes it.
 * Returns whether all of it fitted. */
static bool read_all(int fd, char *out, size_t size) {
    bool whole = true;
    size_t got = 0;
    for (;;) {
        char discard[256];
        const int keep = got + 1 < size;
        const ssize_t n =
            read(fd, keep ? out + got : discard, keep ? size - 1 - got : sizeof discard);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (keep)
            got += (size_t)n;
        else
            whole = false;
    }
    out[got] = '\0';
    close(fd);
    return whole;
}

/* In the probe's child, after hwloc refused the file: where it is not
 * well-formed XML, into the parent's pipe `fd`, then the child's end. A
 * parse that outlasts its own alarm ends the child as a refusal too. */
static void on_parse_alarm(int signo) {
    (void)signo;
    _exit(PROBE_REFUSED);
}

static void say_where_and_exit(const char *path, int fd, size_t size) {
    signal(SIGALRM, on_parse_alarm);
    alarm(PROBE_SECONDS);
    char position[256];
    if (xml_problem(path, position, size < sizeof position ? size : sizeof position)) {
        ssize_t ignored = write(fd, position, strlen(position));
        (void)ignored;
    }
    _exit(PROBE_REFUSED);
}

bg_status_t bg_topology_xml_probe(const char *path, int from_env, int pci,
                                  bg_topology_xml_heard_t *heard) {
    *heard = (bg_topology_xml_heard_t){0};
    char what[PATH_MAX + 16];
    snprintf(what, sizeof what, "%s%s", from_env ? "HWLOC_XMLFILE=" : "", path);
    int said[2], where[2];
    if (pipe2(said, O_CLOEXEC) != 0) said[0] = said[1] = -1;
    if (pipe2(where, O_CLOEXEC) != 0) where[0] = where[1] = -1;
    fflush(NULL);
    const pid_t child = said[0] >= 0 && where[0] >= 0 ? fork() : -1;
    if (child < 0) { /* no probe: load as without one */
        for (int i = 0; i < 2; i++) {
            if (said[i] >= 0) close(said[i]);
            if (where[i] >= 0) close(where[i]);
        }
        return BG_OK;
    }
    if (child == 0) {
        alarm(PROBE_SECONDS); /* a file hwloc loops on ends the child too */
        /* hwloc's complaints go to the parent, which says them once. */
        dup2(said[1], STDERR_FILENO);
        const int quiet = open("/dev/null", O_WRONLY);
        if (quiet >= 0) dup2(quiet, STDOUT_FILENO);
        /* hwloc reads this at its first XML file in a process: this
         * child's, where the parent has read none yet (a second file in
         * one process, rare, is refused without hwloc's words). Set here,
         * the child alone: the parent's environment stays the user's. */
        setenv("HWLOC_XML_VERBOSE", "1", 0);
        hwloc_topology_t hw;
        if (hwloc_topology_init(&hw) != 0) _exit(PROBE_REFUSED);
        /* hwloc's libxml2 plugin (libhwloc-plugins) refuses a malformed
         * file here, its own reader in the load below. */
        if (!from_env && hwloc_topology_set_xml(hw, path) != 0)
            say_where_and_exit(path, where[1], sizeof heard->where);
        if (pci) hwloc_topology_set_io_types_filter(hw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
        if (hwloc_topology_load(hw) == 0) _exit(PROBE_LOADED);
        say_where_and_exit(path, where[1], sizeof heard->where);
    }
    /* Read before the wait: a child that filled a pipe would not end. Its
     * position, small, waits in its pipe while stderr is read. */
    close(said[1]);
    close(where[1]);
    heard->said_whole = read_all(said[0], heard->said, sizeof heard->said);
    read_all(where[0], heard->where, sizeof heard->where);
    int status = 0;
    while (waitpid(child, &status, 0) < 0)
        if (errno != EINTR) return BG_OK;
    if (WIFEXITED(status) &&
        (WEXITSTATUS(status) == PROBE_LOADED || WEXITSTATUS(status) == PROBE_REFUSED)) {
        heard->heard = 1;
        return BG_OK;
    }
    const int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    if (sig == SIGALRM)
        return bg_error_set(BG_ERR_INVALID, "%s: hwloc did not finish reading it in %d s", what,
                            PROBE_SECONDS);
    /* Stopped from outside (the OOM killer, a signal to the process group):
     * nothing is known of the file. */
    if (sig == SIGKILL || sig == SIGTERM || sig == SIGINT || sig == SIGHUP)
        return bg_error_set(BG_ERR_INTERNAL,
                            "%s: the process that read it first was stopped (signal %d)", what,
                            sig);
    char how[48];
    if (sig != 0)
        snprintf(how, sizeof how, "signal %d", sig);
    else /* a sanitizer's report ends the child with an exit status */
        snprintf(how, sizeof how, "exit status %d", WEXITSTATUS(status));
    return bg_error_set(BG_ERR_INVALID,
                        "%s: hwloc crashed reading it (%s): not an hwloc XML topology as lstopo "
                        "--of xml writes it (every object with a cpuset also has complete_cpuset, "
                        "nodeset and complete_nodeset)",
                        what, how);
}

int bg_topology_xml_silence_stderr(void) {
    fflush(stderr);
    const int kept = dup(STDERR_FILENO);
    const int quiet = open("/dev/null", O_WRONLY);
    if (kept < 0 || quiet < 0 || dup2(quiet, STDERR_FILENO) < 0) {
        if (kept >= 0) close(kept);
        if (quiet >= 0) close(quiet);
        return -1;
    }
    close(quiet);
    return kept;
}

void bg_topology_xml_restore_stderr(int kept) {
    if (kept < 0) return;
    dup2(kept, STDERR_FILENO);
    close(kept);
}

/* What hwloc said of a file it refused (`said`, from
 * bg_topology_xml_probe; its lines are cut apart in place) into `out`: the
 * lines that say why, without the file's name or "hwloc: " before them,
 * joined by "; "; those that only say its XML reader failed are left out
 * (xml_problem says where). */
static void hwloc_reasons(char *said, const char *path, char *out, size_t size) {
    static const char *const uninformative[] = {"minimalistic parser",
                                                "generated by hwloc, try enabling",
                                                "XML component discovery failed"};
    static const char aborting[] = ", aborting!";
    const char *slash = strrchr(path, '/'), *base = slash != NULL ? slash + 1 : path;
    const size_t path_length = strlen(path), base_length = strlen(base), tail = strlen(aborting);
    size_t used = 0;
    out[0] = '\0';
    char *rest = NULL;
    for (char *line = strtok_r(said, "\n", &rest); line != NULL;
         line = strtok_r(NULL, "\n", &rest)) {
        char *text = line;
        /* hwloc names the file by the path it was given, or by its base. */
        if (strncmp(text, path, path_length) == 0 && strncmp(text + path_length, ": ", 2) == 0)
            text += path_length + 2;
        else if (strncmp(text, base, base_length) == 0 && strncmp(text + base_length, ": ", 2) == 0)
            text += base_length + 2;
        if (strncmp(text, "hwloc: ", 7) == 0) text += 7;
        const size_t length = strlen(text);
        if (length >= tail && strcmp(text + length - tail, aborting) == 0)
            text[length - tail] = '\0';
        int useful = text[0] != '\0';
        for (size_t i = 0; useful && i < sizeof uninformative / sizeof uninformative[0]; i++)
            useful = strstr(text, uninformative[i]) == NULL;
        if (useful && used < size)
            used += (size_t)snprintf(out + used, size - used, "%s%s", used > 0 ? "; " : "", text);
    }
}

void bg_topology_xml_refusal(const char *path, bg_topology_xml_heard_t *heard, char *out,
                             size_t size) {
    /* A line cut off where the buffer ended is no reason. */
    char *last = strrchr(heard->said, '\n');
    if (!heard->said_whole) *(last != NULL ? last + 1 : heard->said) = '\0';
    char reasons[sizeof heard->said];
    hwloc_reasons(heard->said, path, reasons, sizeof reasons);
    if (heard->where[0] != '\0')
        snprintf(out, size, " (%s)", heard->where);
    else if (reasons[0] != '\0')
        snprintf(out, size, " (hwloc: %s)", reasons);
    else /* well-formed XML of something else, say: what one should be */
        snprintf(out, size,
                 " (hwloc gave no reason; a topology is what 'lstopo FILE.xml' writes: a "
                 "root element <topology> holding the machine's objects)");
}
