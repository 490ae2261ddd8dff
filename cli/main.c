/* brigade: pipeline model-parallel training. This file only dispatches to the
 * subcommands (cli/cmd_*.c). */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const char usage[] =
    "usage: brigade COMMAND [ARGS]\n"
    "\n"
    "Pipeline model-parallel training: cut a layer stack into stages and stream\n"
    "micro-batches through them.\n"
    "\n"
    "commands:\n"
    "  summary MODEL   layer table: output shape, parameters, FLOPs, activation bytes\n"
    "  train   MODEL   train a model and report test accuracy and samples/s\n"
    "  plan    MODEL   stages, devices, predicted time and memory; refuses what\n"
    "                  cannot fit\n"
    "  simulate MODEL  predicted run: the same per-stage summary as train, from the\n"
    "                  cost model or a measured profile\n"
    "  sweep   MODEL   step time, throughput, bubble and memory for each micro-batch\n"
    "                  count, measured or simulated\n"
    "  profile MODEL   measured per-layer times and copy bandwidth for the planner\n"
    "  topo            packages, NUMA nodes, cores, GPUs and the links between them\n"
    "\n"
    "Guides (docs/): pipelines.md, training.md, reports.md, planner.md,\n"
    "checkpoints.md, model-spec.md, cuda.md, performance.md.\n"
    "\n"
    "'brigade COMMAND --help' explains a command's options.\n"
    "Exit status: 0 success, 1 failure while running, 2 bad usage or bad input.\n";

int main(int argc, char **argv) {
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        fputs(usage, stdout);
        return 0;
    }
    if (strcmp(cmd, "summary") == 0) return bg_cmd_summary(argc - 1, argv + 1);
    if (strcmp(cmd, "train") == 0) return bg_cmd_train(argc - 1, argv + 1);
    if (strcmp(cmd, "plan") == 0) return bg_cmd_plan(argc - 1, argv + 1);
    if (strcmp(cmd, "sweep") == 0) return bg_cmd_sweep(argc - 1, argv + 1);
    if (strcmp(cmd, "simulate") == 0) return bg_cmd_simulate(argc - 1, argv + 1);
    if (strcmp(cmd, "profile") == 0) return bg_cmd_profile(argc - 1, argv + 1);
    if (strcmp(cmd, "topo") == 0) return bg_cmd_topo(argc - 1, argv + 1);
    fprintf(stderr, "brigade: unknown command '%s'\n\n%s", cmd, usage);
    return 2;
}
