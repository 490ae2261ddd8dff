/* How busy the machine is while brigade measures: the load average before
 * a measurement, and the CPU time other processes took during one. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

void bg_cli_note_busy_machine(void) {
    double load = 0;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (getloadavg(&load, 1) != 1 || cores < 1 || load < 0.5 * (double)cores) return;
    fprintf(stderr,
            "note: this machine is busy (load average %.2f over the last minute, %ld logical "
            "CPU%s): what is measured now comes out slower and noisier than on an idle machine\n",
            load, cores, cores == 1 ? "" : "s");
}

/* The machine's CPU seconds in use since boot, all processes together (the
 * first line of /proc/stat less its idle and iowait), or -1. Steal, the
 * time a virtual machine's host ran something else while a CPU here had
 * work, counts as in use: it slows a measurement as another process does. */
static double machine_busy_seconds(void) {
    FILE *f = fopen("/proc/stat", "r");
    if (f == NULL) return -1;
    unsigned long long user, nice, system, idle, iowait, irq, softirq, steal;
    const int read = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system,
                            &idle, &iowait, &irq, &softirq, &steal);
    fclose(f);
    const long ticks = sysconf(_SC_CLK_TCK);
    if (read != 8 || ticks <= 0) return -1;
    return (double)(user + nice + system + irq + softirq + steal) / (double)ticks;
}

/* This process's CPU seconds, all its threads. */
static double own_seconds(void) {
    struct rusage u;
    if (getrusage(RUSAGE_SELF, &u) != 0) return -1;
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static double wall_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

void bg_cli_cpu_start(bg_cli_cpu_sample_t *s) {
    s->busy_s = machine_busy_seconds();
    s->own_s = own_seconds();
    s->wall_s = wall_seconds();
}

double bg_cli_others_cpu_share(const bg_cli_cpu_sample_t *start) {
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    const double busy = machine_busy_seconds(), own = own_seconds();
    const double wall = wall_seconds() - start->wall_s;
    if (start->busy_s < 0 || start->own_s < 0 || busy < 0 || own < 0 || cores < 1 || wall <= 0)
        return -1;
    const double others = (busy - start->busy_s) - (own - start->own_s);
    const double share = others / (wall * (double)cores);
    return share < 0 ? 0 : share > 1 ? 1 : share;
}

void bg_cli_note_others_cpu(double share, const char *what) {
    if (!(share >= BG_CLI_OTHERS_CPU_NOTE)) return;
    const long cores = sysconf(_SC_NPROCESSORS_ONLN);
    fprintf(stderr,
            "note: other processes (or a virtual machine's host) took %.0f%% of this "
            "machine's %ld logical CPU%s while %s: "
            "what was measured then comes out slower and noisier than on an idle machine\n",
            100 * share, cores, cores == 1 ? "" : "s", what);
}
