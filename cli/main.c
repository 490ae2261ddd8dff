/* brigade: pipeline model-parallel training. This file only dispatches to the
 * subcommands (cli/cmd_*.c). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cuda/backend_cuda.h"
#include "spelling.h"

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
    "Guides (docs/): design.md (the architecture), pipelines.md, training.md,\n"
    "reports.md, planner.md, checkpoints.md, model-spec.md, cuda.md,\n"
    "performance.md. They and the models the commands' examples name\n"
    "(examples/) are the source tree's, installed in " BG_SHARE_DIR "/docs\n"
    "and " BG_SHARE_DIR "/examples.\n"
    "\n"
    "'brigade COMMAND --help' (or 'brigade help COMMAND') explains a command's\n"
    "options; 'brigade --version' says which brigade this is.\n"
    "Exit status: 0 success, 1 failure while running, 2 bad usage or bad input;\n"
    "a closed pipe (| head) ends a command by SIGPIPE, as it ends other tools;\n"
    "train and sweep go on without their output and exit 1. Output or messages\n"
    "that could not be written (a full disk, a closed descriptor) make a 0 a 1;\n"
    "a refusal keeps its 2 (plan: a plan that does not fit).\n";

static const struct {
    const char *name;
    int (*run)(int argc, char **argv);
} commands[] = {
    {"summary", bg_cmd_summary}, {"train", bg_cmd_train},       {"plan", bg_cmd_plan},
    {"sweep", bg_cmd_sweep},     {"simulate", bg_cmd_simulate}, {"profile", bg_cmd_profile},
    {"topo", bg_cmd_topo},
};

static int (*command(const char *name))(int, char **) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(name, commands[i].name) == 0) return commands[i].run;
    return NULL;
}

/* Gives a closed standard input /dev/null, and a closed standard output or
 * error /dev/full: otherwise the next file opened (a checkpoint's
 * temporary file, a trace) would take the number and receive what is
 * printed. A write there fails, as it would have, and close_stdout says
 * so. Where there is no /dev/full, /dev/null opened for reading does the
 * same (a write fails with EBADF). Filled from 0 up, each open takes the
 * number being filled. */
static void fill_closed_descriptors(void) {
    for (int fd = 0; fd < 3; fd++) {
        if (fcntl(fd, F_GETFD) != -1) continue;
        int got = fd == 0 ? open("/dev/null", O_RDONLY) : open("/dev/full", O_WRONLY);
        if (got < 0) got = open("/dev/null", O_RDONLY);
        if (got >= 0 && got != fd) { /* a lower number was closed and could not be filled */
            (void)dup2(got, fd);
            (void)close(got);
        }
        if (fd == 1) bg_cli_stdout_closed = 1;
    }
}

/* A command's exit status, once its standard output is flushed: a table
 * or JSON that could not be written (a full disk, /dev/full) is a
 * failure, not a success with nothing in the file. So are messages that
 * could not be written (a closed standard error, or a pipe from it that
 * closed while train or sweep went on), though none can say so. */
static int close_stdout(const char *cmd, int code) {
    errno = 0;
    if (fflush(stdout) == 0 && !ferror(stdout)) return ferror(stderr) && code == 0 ? 1 : code;
    /* A write that failed earlier left no errno here; a closed descriptor
     * (`>&-`) is the usual cause, and says so when asked. */
    if (bg_cli_stdout_closed) errno = EBADF;
    int saved = errno != 0 ? errno : bg_cli_stdout_errno;
    /* A write that failed inside printf left none either. */
    if (saved == 0 && bg_cli_stdout_reader_gone()) saved = EPIPE;
    fprintf(stderr, "brigade%s%s: cannot write the standard output%s%s\n", cmd != NULL ? " " : "",
            cmd != NULL ? cmd : "", saved != 0 ? ": " : "", saved != 0 ? strerror(saved) : "");
    return code != 0 ? code : 1;
}

static int run(int argc, char **argv);

/* The command `word` most likely misspells, or with `options` also
 * --help or --version (a new user's --hlep); NULL where none is near. */
static const char *nearest_word(const char *word, int options) {
    enum { COMMANDS = sizeof commands / sizeof commands[0] };
    const char *names[COMMANDS + 2];
    for (size_t i = 0; i < COMMANDS; i++) names[i] = commands[i].name;
    names[COMMANDS] = "--help";
    names[COMMANDS + 1] = "--version";
    const size_t count = COMMANDS + (options ? 2 : 0);
    return strlen(word) >= 2 ? bg_spelling_nearest(word, names, count, strlen(word)) : NULL;
}

/* Under an address-space limit, the process ends without the libraries'
 * exit handlers: OpenBLAS's joins a worker thread that may spin without
 * end where it could not map its buffer (bg_cli_note_address_limit), so
 * even --version hung at exit under ulimit -v 150000. Every output is
 * written and closed by then. */
int main(int argc, char **argv) {
    const int code = run(argc, argv);
    if (bg_cli_address_limited()) {
        fflush(NULL);
        _exit(code);
    }
    return code;
}

/* A HWLOC_XMLFILE that is not there, which hwloc passes over for this
 * machine itself (a cache file set for every node of a cluster may be
 * missing on some): said once, before any command, as each may read it. */
static void note_xmlfile(void) {
    const char *file = getenv("HWLOC_XMLFILE");
    if (file != NULL && file[0] != '\0' && access(file, F_OK) != 0)
        fprintf(stderr, "note: HWLOC_XMLFILE=%s: %s, so hwloc reads this machine itself instead\n",
                file, strerror(errno));
}

static int run(int argc, char **argv) {
    fill_closed_descriptors();
    /* A file past `ulimit -f` fails its write (EFBIG), named by the
       writer, rather than ending the process with no word. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) {
        fputs(usage, stderr);
        return 2;
    }
    const char *cmd = argv[1];
    /* A help text (under 64 KiB) waits in the buffer until close_stdout
     * flushes it, so that a write that fails (/dev/full) fails there, where
     * errno still says why. */
    static char help_buffer[1 << 16];
    for (int i = 1; i < argc; i++) /* an option's value too: a larger buffer harms nothing */
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0 ||
            (i == 1 && strcmp(argv[i], "help") == 0)) {
            setvbuf(stdout, help_buffer, _IOFBF, sizeof help_buffer);
            break;
        }
    if (strcmp(cmd, "--version") == 0) {
        if (argc > 2) {
            fprintf(stderr, "brigade: --version takes nothing after it, got '%s'\n", argv[2]);
            return 2;
        }
        printf("brigade %s (CUDA backend %s)\n", BG_VERSION,
               bg_cuda_built() ? "built, loaded when a GPU is asked for" : "not built");
        return close_stdout(NULL, 0);
    }
    if (strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0 || strcmp(cmd, "help") == 0) {
        /* help COMMAND (or --help COMMAND) is COMMAND --help. */
        if (argc == 3 && command(argv[2]) != NULL) {
            char help_flag[] = "--help";
            char *help_argv[] = {argv[2], help_flag, NULL};
            return close_stdout(argv[2], command(argv[2])(2, help_argv));
        }
        if (argc > 3) {
            fprintf(stderr, "brigade: help explains one command, not %d\n\n%s", argc - 2, usage);
            return 2;
        }
        if (argc == 3) {
            const char *near = nearest_word(argv[2], 0);
            if (near != NULL) /* as `brigade trian` has it (a new user's `help trian`) */
                fprintf(stderr, "brigade: no command '%s' to explain (did you mean %s?)\n", argv[2],
                        near);
            else
                fprintf(stderr, "brigade: no command '%s' to explain\n\n%s", argv[2], usage);
            return 2;
        }
        fputs(usage, stdout);
        return close_stdout(NULL, 0);
    }
    if (command(cmd) != NULL) {
        note_xmlfile();
        return close_stdout(cmd, command(cmd)(argc - 1, argv + 1));
    }
    const char *near = nearest_word(cmd, 1);
    if (strcmp(cmd, "version") == 0)
        fprintf(stderr, "brigade: unknown command 'version' (brigade --version prints it)\n");
    else if (near != NULL) /* a misspelt one: its usage would bury the guess */
        fprintf(stderr, "brigade: unknown command '%s' (did you mean %s?)\n", cmd, near);
    else
        fprintf(stderr, "brigade: unknown command '%s'\n\n%s", cmd, usage);
    return 2;
}
