/* Shared pieces of the brigade command: option parsing helpers, number
 * formatting, and the subcommands' entry points. Every entry point returns
 * the process exit status (0 ok, 1 failure while running, 2 bad usage or
 * bad input) after printing its own messages. */
#ifndef BG_CLI_H
#define BG_CLI_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include "model_spec.h"
#include "optimizer.h"
#include "status.h"
#include "timeline.h"
#include "topology.h"

int bg_cmd_summary(int argc, char **argv);
int bg_cmd_train(int argc, char **argv);
int bg_cmd_plan(int argc, char **argv);
int bg_cmd_sweep(int argc, char **argv);
int bg_cmd_topo(int argc, char **argv);
int bg_cmd_profile(int argc, char **argv);
int bg_cmd_simulate(int argc, char **argv);

/* `text` (a file name from the command line) as a header or note shows
 * it: itself when it holds no control character (C0, DEL, or C1 in UTF-8),
 * else a copy in `buf` with each byte of one as \xNN (a newline too), so that no name can act on
 * the terminal or split a line; cut to whole characters that fit `size`. */
enum { BG_CLI_SHOWN_MAX = 4 * 4096 + 1 };
const char *bg_cli_shown(const char *text, char *buf, size_t size);

/* Prints "brigade CMD: message" to stderr and returns exit status 2. In
 * this and bg_cli_fail's message, control characters (a file name may hold
 * an escape sequence) are written as \xNN, newlines and tabs as they are. */
int bg_cli_usage_error(const char *cmd, const char *format, ...)
    __attribute__((format(printf, 2, 3)));

/* Prints "brigade CMD: <library message>" and returns the status's exit code. */
int bg_cli_fail(const char *cmd, bg_status_t status);

/* The status to report when an input the user named (model spec, dataset,
 * checkpoint) cannot be loaded: an input that cannot be read is bad input
 * (exit 2), so BG_ERR_IO becomes BG_ERR_INVALID; others pass unchanged. */
bg_status_t bg_cli_input_status(bg_status_t status);

/* Loads the model spec at `path` for a command, its failure as
 * bg_cli_input_status has it; where no file is there and the name is one of
 * the example models (examples/NAME), the message names where they are
 * installed (BG_SHARE_DIR/examples/NAME), where that file exists. */
bg_status_t bg_cli_model_load(const char *path, bg_model_spec_t **out);

/* Notes on stderr about --data, before the data is read: where it names a
 * keyword (fashion-mnist, synthetic) that is also a folder here, that the
 * keyword is read and how to reach the folder (`given`: --data was on the
 * command line, else the keyword is the command's default and the note
 * says so); where --data synthetic makes fewer samples than usual for
 * `shape` and `classes` (an input so large that they would pass 1 GiB:
 * bg_dataset_synthetic_counts), how many, before a --batch larger than
 * them is refused. */
void bg_cli_note_data(const char *data, int given, bg_shape_t shape, int64_t classes);

/* fflush(stdout), noting why the first flush that failed did
 * (bg_cli_stdout_errno): by the command's end stdio has forgotten it, and a
 * full disk's table would be reported without a reason. */
void bg_cli_flush_stdout(void);
extern int bg_cli_stdout_errno; /* 0 until a flush of stdout fails */
/* 1 when the standard output was closed as brigade started (`>&-`): main.c
 * gave the descriptor /dev/full, where every write fails. */
extern int bg_cli_stdout_closed;

/* A failed write of `path` (status, message set), said so where `path` is
 * a link to the standard output that was closed as brigade started
 * (/dev/stdout, /dev/fd/1): it was given /dev/full, whose "No space left on
 * device" would say nothing of why (until 2026-12-06 it was the reason
 * given). The message then becomes `prefix` and why; status as given. */
bg_status_t bg_cli_closed_stdout_status(bg_status_t status, const char *prefix, const char *path);

/* The stop signals (SIGINT, SIGTERM, SIGHUP) and the handlers they had. */
enum { BG_CLI_STOP_SIGNALS = 3 };
typedef struct bg_cli_stop_handlers {
    struct sigaction old[BG_CLI_STOP_SIGNALS];
} bg_cli_stop_handlers_t;

/* Around the writing of a command's output files: a reader of stdout gone
 * (`| head`) ends the command by SIGPIPE, as main.c's help says, but only
 * once every file is written (simulate wrote its first and lost the rest;
 * a profile's table longer than stdio's buffer lost the profile). A
 * command that ignores SIGPIPE throughout (train, sweep) goes on ignoring
 * it. A stop signal meanwhile leaves no temporary file
 * (bg_cli_clean_stop_signals): for commands that do not catch the stop
 * signals themselves (simulate, profile; not train or sweep). */
typedef struct bg_cli_files_guard {
    struct sigaction before;
    int saved;
    bg_cli_stop_handlers_t stops; /* (bg_cli_clean_stop_signals) */
} bg_cli_files_guard_t;
void bg_cli_files_begin(bg_cli_files_guard_t *guard);
void bg_cli_files_end(bg_cli_files_guard_t *guard);

/* Whether stdout is a pipe or FIFO whose reader has gone (`| head` done):
 * where a write failed inside printf, which leaves no errno to ask. */
int bg_cli_stdout_reader_gone(void);

/* The most steps a report records (train --record-steps, simulate --steps,
 * sweep --steps): each step's events are kept for the timeline. */
enum { BG_CLI_MAX_RECORDED_STEPS = 1000 };

/* Before a measurement (profile, a measured sweep): a note on stderr when
 * the machine is busy, its load average over the last minute at least half
 * its logical CPUs online (hardware threads; the load average counts
 * runnable threads the same way), since times measured then come out
 * slower and noisier than on an idle machine. */
void bg_cli_note_busy_machine(void);

/* The CPU time the machine and this process had used at the start of a
 * measurement (cli/machine_load.c), to tell afterwards how much of the
 * machine other processes took meanwhile: a load average taken before
 * misses a machine that gets busy during the measurement. */
typedef struct bg_cli_cpu_sample {
    double busy_s, own_s, wall_s; /* busy_s or own_s < 0: unknown */
} bg_cli_cpu_sample_t;

void bg_cli_cpu_start(bg_cli_cpu_sample_t *s);

/* The share of the machine's CPU time (all its logical CPUs over the wall
 * time since `start`) that other processes took: the CPU time in use
 * (/proc/stat) less this process's own (getrusage), in [0, 1]; -1 where
 * either cannot be read. */
double bg_cli_others_cpu_share(const bg_cli_cpu_sample_t *start);

/* A share of the machine at which a measurement notes other processes. */
#define BG_CLI_OTHERS_CPU_NOTE 0.10

/* A note on stderr where `share` (bg_cli_others_cpu_share) is at least
 * BG_CLI_OTHERS_CPU_NOTE; `what`: while what ran ("the points ran"). */
void bg_cli_note_others_cpu(double share, const char *what);

/* Whether an address-space or data limit (ulimit -v or -d: RLIMIT_AS,
 * RLIMIT_DATA) is set. */
int bg_cli_address_limited(void);

/* Before a command computes with OpenBLAS (train, profile, a measured
 * sweep): a note on stderr where an address-space limit is set, under
 * which an OpenBLAS without its fix of 2025 may hang rather than fail. */
void bg_cli_note_address_limit(void);

/* bg_cli_input_status for the file an option named, its message led by the
 * option ("--resume: cannot read 'x.st': No such file or directory"). */
bg_status_t bg_cli_option_input_status(bg_status_t status, const char *option);

/* The value of option argv[*i]: argv[*i + 1], advancing *i past it.
 * BG_ERR_INVALID when there is none ("--batch needs a value"), when it
 * starts with "--" (the next option, not a value), and when the option was
 * given before ("--stages given twice"). */
bg_status_t bg_cli_option_value(int argc, char **argv, int *i, const char **out);

/* Checks flag argv[i] (an option without a value: --json, --recompute):
 * BG_ERR_INVALID when it was given before ("--json given twice"), as for
 * options with a value. */
bg_status_t bg_cli_flag(char **argv, int i);

/* BG_ERR_INVALID for an option the command does not know. Where it is
 * "--steps=2" and --steps is one of the command's options that take a value
 * (`options`, `count` of them, and the placement's when `placement` is 1),
 * the message shows the form brigade reads, "--steps 2"; where it is a
 * flag's (`flags`, its flags apart from --help, space-separated, or NULL)
 * with a value, that it takes none; else the option it most likely
 * misspells, if one is. */
bg_status_t bg_cli_unknown_option(const char *arg, const char *const *options, size_t count,
                                  int placement, const char *flags);

/* BG_ERR_INVALID for a second MODEL word. Where the command has options
 * that take values (`values` 1), a word that names no file is most often
 * the end of a value written with a space ("--device-mem 512 M"), and the
 * message says so. */
bg_status_t bg_cli_second_model(const char *first, const char *second, int values);

/* Calls take(option, item, ctx) for each comma-separated item of text (a
 * list option's value: sweep's --microbatches, profile's --sizes); an
 * empty item ("4,", ",4", "4,,8") or an empty list is BG_ERR_INVALID. */
bg_status_t bg_cli_for_each_item(const char *option, const char *text,
                                 bg_status_t (*take)(const char *, const char *, void *),
                                 void *ctx);

/* Parses a whole decimal integer in [min, max]; BG_ERR_INVALID with a message
 * naming the option otherwise. */
bg_status_t bg_cli_parse_int(const char *option, const char *text, int64_t min, int64_t max,
                             int64_t *out);

/* Parses --optimizer's value (sgd or adam); the message names the option. */
bg_status_t bg_cli_parse_optimizer(const char *option, const char *text, bg_optimizer_kind_t *out);

/* Refuses SGD-only settings (--momentum, given in argv at all, 0 too) with
 * another optimizer, which would ignore them. */
bg_status_t bg_cli_check_optimizer(const bg_optimizer_config_t *optimizer, int argc, char **argv);

/* Parses a whole finite floating-point number in [min, max]. */
bg_status_t bg_cli_parse_double(const char *option, const char *text, double min, double max,
                                double *out);

/* Checks before a long run that `path`, given to `option`, can be written:
 * not a directory, and writable if it exists, else in an existing folder
 * that takes files; not "-" (standard output, which holds the text
 * report); for --timeline and --chart, not named as another image format
 * than SVG. BG_ERR_INVALID naming the option, the path and the reason
 * otherwise; NULL passes. The run's own write still reports what
 * this cannot foresee (a full disk). */
bg_status_t bg_cli_check_output(const char *option, const char *path);

/* The same for a file that is always replaced whole, never written into (a
 * checkpoint: lib/atomic_file.h): a symbolic link, a FIFO or a device there
 * would be replaced by a regular file, so they are refused. */
bg_status_t bg_cli_check_replaced(const char *option, const char *path);

/* A file named on the command line: the option that names it ("MODEL" for
 * the model spec), its path (NULL: not given), and whether the command
 * writes it (an output) or reads it (an input). An input may name
 * `replaced_by`, the one output allowed to be the same file (--resume F
 * --save F: the run reads F first and replaces it at the end). An input
 * `if_present` need not exist: one of several names the reader tries, in
 * order (a data set's file, plain before gzip'd), which an output made
 * there would shadow. */
typedef struct bg_cli_file {
    const char *option, *path;
    int output;
    const char *replaced_by;
    int if_present;
} bg_cli_file_t;

/* 1 when paths a and b name one regular file (the same device and inode,
 * through links and `..`), else 0. */
int bg_cli_same_file(const char *a, const char *b);

/* Refuses, before a run, two outputs that name one file (the last written
 * would silently replace the other) and an output that names an input
 * (writing it would destroy what the run read): BG_ERR_INVALID naming both
 * options and the path. One file is found under two spellings: an existing
 * file by its device and inode (links included), a new one by its folder's
 * real path and its name. */
bg_status_t bg_cli_check_distinct(const bg_cli_file_t *files, int count);

/* The file hwloc reads this machine from (HWLOC_XMLFILE), an input for
 * bg_cli_check_distinct where `topology_path` (--topology) does not
 * replace it; NULL where there is none. */
const char *bg_cli_env_topology(const char *topology_path);

/* Before a run on `topology`: a note where it cannot bind the worker
 * threads to cores because hwloc read HWLOC_XMLFILE as another machine's. */
void bg_cli_note_unbound(const bg_topology_t *topology);

/* Appends to files[count..] the IDX files that --data `source` reads
 * (bg_dataset_files: inputs named even before they exist, since an output
 * there would shadow a .gz) and returns the new count; files has room for
 * BG_DATASET_FILES more. The paths live until the next call. */
int bg_cli_add_data_files(bg_cli_file_t *files, int count, const char *source);

/* Formats a rate (samples/s) into buf: whole below 100 only to 3
 * significant digits ("0.0123", "8.4"), so that a slow model's is not "0". */
const char *bg_cli_rate(double per_s, char *buf, size_t size);

/* Formats a loss into buf: to 4 decimals, and from a million on with an
 * exponent ("2.308e+35"), which %.4f would give 36 digits of. */
const char *bg_cli_loss(double loss, char *buf, size_t size);

/* Formats n with thousands separators ("693,962") into buf. */
const char *bg_cli_group_digits(int64_t n, char *buf, size_t size);

/* The signal that asked a long command (train, sweep) to stop (SIGINT,
 * SIGTERM, SIGHUP), or 0 (cli/stop_signals.c): the command stops after
 * what is in progress, keeps what it has, and then ends by that signal
 * (bg_cli_end_by_stop_signal), as a shell expects of a command it
 * interrupted. A second signal a second or more after the first ends the
 * process at once. */
extern volatile sig_atomic_t bg_cli_stop_signal;

/* Catches the stop signals, leaving ignored ones ignored (a job started
 * with nohup or in the background); *old to restore. The first signal is
 * answered on stderr with `reply` (a string that outlives the handlers:
 * what the command will still do, and that a second signal quits at
 * once), so that a user at a terminal knows it was heard; the second,
 * that nothing more is written, after "brigade CMD:" as every message of
 * the command begins; a repeat within a second of the first (the same
 * request), that it is already stopping. */
void bg_cli_catch_stop_signals(bg_cli_stop_handlers_t *old, const char *cmd, const char *reply);

/* From now on, the first signal is answered with `reply` (a string that
 * outlives the handlers): a command past its long work, writing its
 * results, says that it ends once they are written. */
void bg_cli_set_stop_reply(const char *reply);

/* What the answer to a second signal adds after "nothing more is written"
 * (as "; F holds step 40 (...)": what is kept), from now on; copied, its
 * control characters shown as \xNN (bg_cli_shown), cut at BG_ERROR_MAX. */
void bg_cli_set_quit_note(const char *note);

/* For a command that does not catch the stop signals (simulate, profile)
 * while it writes its files: a stop signal removes the temporary file of a
 * write in progress and then ends the process as its default action would
 * (until 2026-12-06 the temporary file stayed, up to the trace's size,
 * until a later write of the same path). Signals ignored stay ignored; *old
 * to restore (bg_cli_restore_stop_signals). */
void bg_cli_clean_stop_signals(bg_cli_stop_handlers_t *old);

/* Puts back the handlers of before bg_cli_catch_stop_signals or
 * bg_cli_clean_stop_signals. */
void bg_cli_restore_stop_signals(const bg_cli_stop_handlers_t *old);

/* After a stop signal: ends the process by it (its default action), once
 * everything is written; returns only if that did not end it. */
void bg_cli_end_by_stop_signal(void);

/* A command's output files, written one after another once its work is
 * done: one that cannot be written (a full disk) is reported at once, as
 * "brigade CMD: message", and the others are still written; the first
 * failure's status gives the exit code. */
typedef struct bg_cli_outputs {
    const char *cmd;
    bg_status_t failed; /* the first failure; BG_OK while none */
} bg_cli_outputs_t;

/* Notes how writing one output went: `what` and `path` make the line
 * printed on stderr on success ("metrics written to m.json", a note like
 * the others, so that stdout holds the report alone); a failure is
 * reported with bg_error_message(). */
void bg_cli_output_written(bg_cli_outputs_t *outputs, bg_status_t status, const char *what,
                           const char *path);

/* Writes --trace and --timeline (either may be NULL) of tl, its last step
 * drawn, as bg_cli_output_written reports them. */
void bg_cli_write_timeline_files(bg_cli_outputs_t *outputs, const char *trace, const char *svg,
                                 const bg_timeline_t *tl);

#endif /* BG_CLI_H */
