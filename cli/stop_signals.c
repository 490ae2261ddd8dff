/* Stopping a long command cleanly on SIGINT, SIGTERM or SIGHUP (cli.h):
 * the command finishes what is in progress, keeps what it has, and then
 * ends by that signal, as a shell expects of a command it interrupted. */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "atomic_file.h"
#include "cli.h"

volatile sig_atomic_t bg_cli_stop_signal;
/* When the first signal came (CLOCK_MONOTONIC ns, at least 1; 0: none
 * yet), claimed by one compare-exchange: two threads taking signals at
 * once (timeout(1) signals the command and then its group) cannot both be
 * the first, nor one find the first signal without its time. */
_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the stop signal handler needs lock-free atomics");
static atomic_llong first_ns;
/* What the first signal is answered with: set again as the command moves
 * on (bg_cli_set_stop_reply), so atomic, as the handler may run on any
 * thread. */
_Static_assert(ATOMIC_POINTER_LOCK_FREE == 2, "the stop signal handler needs lock-free pointers");
static _Atomic(const char *) stop_reply;
static char quit_reply[96];    /* and a second one, before any note */
static char repeat_reply[160]; /* and one within a second of the first */
static int stderr_terminal;    /* where a progress bar may hold a line open */
/* What a second signal's answer adds (bg_cli_set_quit_note): two buffers,
 * the one `quit_note` names (-1: none) whole while the other is written,
 * and no more written once `quitting` (the handler reading one). Atomic:
 * the handler may run on any thread, and lock-free atomics are
 * async-signal-safe. */
_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "the stop signal handler needs lock-free atomic ints");
static char quit_notes[2][BG_ERROR_MAX];
static atomic_int quit_note = -1, quitting;

/* Writes `text` to stderr as it is (write(2) is async-signal-safe; stdio
 * is not). */
static void put(const char *text) {
    ssize_t ignored = write(STDERR_FILENO, text, strlen(text));
    (void)ignored;
}

/* Writes `text` to stderr on a line of its own: its leading newline ends a progress bar's line,
 * which only a terminal has (elsewhere it would be a blank line). */
static void say(const char *text) {
    if (text[0] == '\n' && !stderr_terminal) text++;
    put(text);
}

/* SIGHUP: the terminal or ssh session went away. */
static const int stop_signals[BG_CLI_STOP_SIGNALS] = {SIGINT, SIGTERM, SIGHUP};

/* Ends the process by `signo`'s default action (async-signal-safe). */
static void die_by(int signo) {
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(signo, &dfl, NULL);
    raise(signo);
}

/* A second signal a second or more after the first ends the process at
 * once; one sooner is the same request again, answered so where a person
 * could have sent it (a tenth of a second or more after the first:
 * timeout(1) signals the command and then its process group at once). */
static void on_stop_signal(int signo) {
    const int saved_errno = errno; /* write may set it under the code interrupted */
    struct timespec now;           /* clock_gettime, sigaction and raise are async-signal-safe */
    clock_gettime(CLOCK_MONOTONIC, &now);
    const long long ns = (long long)now.tv_sec * 1000000000 + now.tv_nsec;
    long long first = 0;
    if (atomic_compare_exchange_strong(&first_ns, &first, ns > 0 ? ns : 1)) {
        bg_cli_stop_signal = signo;
        const char *reply = atomic_load(&stop_reply);
        if (reply != NULL) say(reply);
    } else if (ns - first < 1000000000) {
        if (ns - first >= 100000000) say(repeat_reply); /* heard, not ignored in silence */
    } else {
        /* A save cut short leaves no temporary file (the file saved is
         * as it was). */
        bg_atomic_file_remove_unfinished();
        say(quit_reply);
        atomic_store(&quitting, 1);
        const int note = atomic_load(&quit_note);
        if (note >= 0) put(quit_notes[note]);
        put("\n");
        die_by(signo);
    }
    errno = saved_errno;
}

/* Gives every stop signal not ignored `handler` (the others blocked while
 * it runs; calls interrupted restarted), keeping the handlers before in
 * *old. */
static void install(void (*handler)(int), bg_cli_stop_handlers_t *old) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < BG_CLI_STOP_SIGNALS; i++) sigaddset(&sa.sa_mask, stop_signals[i]);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < BG_CLI_STOP_SIGNALS; i++) {
        sigaction(stop_signals[i], NULL, &old->old[i]);
        if (old->old[i].sa_handler != SIG_IGN) sigaction(stop_signals[i], &sa, NULL);
    }
}

void bg_cli_catch_stop_signals(bg_cli_stop_handlers_t *old, const char *cmd, const char *reply) {
    atomic_store(&stop_reply, reply);
    snprintf(quit_reply, sizeof quit_reply,
             "\nbrigade %s: a second signal: quitting at once; nothing more is written", cmd);
    snprintf(repeat_reply, sizeof repeat_reply,
             "\nbrigade %s: already stopping (a signal within a second of the first is the same "
             "request); a signal a second or more after it quits at once\n",
             cmd);
    stderr_terminal = isatty(STDERR_FILENO);
    install(on_stop_signal, old);
}

/* The stop signal during a command's writes (bg_cli_clean_stop_signals). */
static void on_stop_while_writing(int signo) {
    bg_atomic_file_remove_unfinished();
    die_by(signo);
}

void bg_cli_clean_stop_signals(bg_cli_stop_handlers_t *old) { install(on_stop_while_writing, old); }

void bg_cli_set_stop_reply(const char *reply) { atomic_store(&stop_reply, reply); }

void bg_cli_set_quit_note(const char *note) {
    if (atomic_load(&quitting)) return;
    const int next = atomic_load(&quit_note) == 0 ? 1 : 0;
    char shown[BG_ERROR_MAX];
    snprintf(quit_notes[next], sizeof quit_notes[next], "%s",
             bg_cli_shown(note, shown, sizeof shown));
    atomic_store(&quit_note, next);
}

void bg_cli_restore_stop_signals(const bg_cli_stop_handlers_t *old) {
    for (int i = 0; i < BG_CLI_STOP_SIGNALS; i++) sigaction(stop_signals[i], &old->old[i], NULL);
}

void bg_cli_end_by_stop_signal(void) {
    fflush(NULL);
    die_by(bg_cli_stop_signal);
}
