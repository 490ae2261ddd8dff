#include "progress.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "cli.h"
#include "monotonic.h"

static void format_duration(double seconds, char *buf, size_t size) {
    long s = (long)(seconds + 0.5);
    if (s >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
    else
        snprintf(buf, size, "%ld:%02ld", s / 60, s % 60);
}

void bg_progress_init(bg_progress_t *p, FILE *out, int64_t steps_per_epoch) {
    p->out = out;
    p->terminal = isatty(fileno(out));
    p->steps_per_epoch = steps_per_epoch > 0 ? steps_per_epoch : 1;
    p->started = bg_monotonic_seconds();
    p->last_draw = 0;
    p->last_tenth = 0;
    p->what = "units";
    p->quiet_s = 0;
    p->line_open = 0;
}

double bg_progress_left_s(const bg_progress_t *p, int64_t done, int64_t total, double now) {
    return done > 0 ? (now - p->started) * (double)(total - done) / (double)done : 0;
}

void bg_progress_count(void *ctx, int64_t done, int64_t total) {
    bg_progress_t *p = ctx;
    if (total < 1) return;
    if (done == 0) {
        /* The count starts now: the time left follows from this work alone,
         * and its tenths are printed afresh (an earlier count's are not). */
        p->started = bg_monotonic_seconds();
        p->last_tenth = 0;
        p->last_draw = 0;
        return;
    }
    const double now = bg_monotonic_seconds(), elapsed = now - p->started;
    if (elapsed < p->quiet_s) return;
    char left[32];
    format_duration(bg_progress_left_s(p, done, total, now), left, sizeof left);
    const int finished = done >= total;
    if (p->terminal) {
        if (!finished && now - p->last_draw < 0.1) return;
        p->last_draw = now;
        fprintf(p->out, "\r\033[K%s %lld/%lld (%d%%), %s left", p->what, (long long)done,
                (long long)total, (int)(100 * done / total), left);
        if (finished) fputc('\n', p->out);
        p->line_open = !finished;
        fflush(p->out);
        return;
    }
    const int64_t tenth = 10 * done / total;
    if (tenth <= p->last_tenth && !finished) return;
    p->last_tenth = tenth;
    fprintf(p->out, "%s %lld/%lld (%d%%), %s left\n", p->what, (long long)done, (long long)total,
            (int)(100 * done / total), left);
    fflush(p->out);
}

/* The terminal's width in columns, or 0 where it does not say. */
static int terminal_columns(FILE *out) {
    struct winsize size;
    if (ioctl(fileno(out), TIOCGWINSZ, &size) != 0) return 0;
    return size.ws_col;
}

/* The epoch's mean loss so far (bg_cli_loss: 32 bytes hold it), or "-"
 * while none counted (every step of it skipped for non-finite values). */
static void format_loss(double loss, char *buf, size_t size) {
    if (isnan(loss))
        snprintf(buf, size, "-");
    else
        bg_cli_loss(loss, buf, size);
}

/* The terminal's progress line into buf: the whole of it where the
 * terminal is wide enough (99 columns with a learning rate), else without
 * the bar, then without the learning rate and throughput, then cut after
 * a whole field: a line that wrapped would leave a copy of itself at every
 * redraw. */
static void terminal_line(const bg_train_progress_t *r, const char *lr, const char *eta,
                          int columns, char *buf, size_t size) {
    enum { WIDTH = 24 };
    char loss[32];
    format_loss(r->loss, loss, sizeof loss);
    int filled = (int)(WIDTH * r->step / (r->total_steps > 0 ? r->total_steps : 1));
    char bar[WIDTH + 4];
    bar[0] = '[';
    for (int i = 0; i < WIDTH; i++) bar[i + 1] = i < filled ? '#' : '.';
    snprintf(bar + WIDTH + 1, 3, "] ");
    for (int shorter = 0; shorter < 3; shorter++) {
        char rate[48] = "";
        if (shorter < 2) snprintf(rate, sizeof rate, "%s  %.0f samples/s", lr, r->samples_per_s);
        snprintf(buf, size, "epoch %d/%d %sstep %lld/%lld  loss %s%s  ETA %s", r->epoch, r->epochs,
                 shorter == 0 ? bar : " ", (long long)r->step, (long long)r->total_steps, loss,
                 rate, eta);
        if (columns <= 0 || (int)strlen(buf) < columns) return;
    }
    /* Whole fields only (two spaces apart): "step 55/3" would read as
     * another total. */
    if (columns - 1 < (int)size) buf[columns - 1] = '\0';
    char *end = NULL;
    for (char *at = strstr(buf, "  "); at != NULL; at = strstr(at + 1, "  ")) end = at;
    if (end != NULL) *end = '\0';
}

void bg_progress_report(void *ctx, const bg_train_progress_t *r) {
    bg_progress_t *p = ctx;
    char eta[32], lr[32] = "";
    format_duration(r->eta_s, eta, sizeof eta);
    if (r->lr >= 0) snprintf(lr, sizeof lr, "%slr %.3g", p->terminal ? "  " : " ", r->lr);
    int64_t in_epoch = (r->step - 1) % p->steps_per_epoch + 1;
    if (p->terminal) {
        double now = bg_monotonic_seconds();
        /* Redrawing every step would cost more than a small model's step. */
        if (!r->epoch_done && now - p->last_draw < 0.1) return;
        p->last_draw = now;
        char line[256];
        terminal_line(r, lr, eta, terminal_columns(p->out), line, sizeof line);
        fprintf(p->out, "\r\033[K%s", line);
        if (r->epoch_done) fputc('\n', p->out);
        p->line_open = !r->epoch_done;
        fflush(p->out);
        return;
    }
    /* A line per tenth of an epoch, rounded up (until 2026-12-06 down: an
     * epoch of 10 to 19 steps printed every step). */
    const int64_t tenth = p->steps_per_epoch > 10 ? (p->steps_per_epoch + 9) / 10 : 1;
    if (!r->epoch_done && in_epoch % tenth != 0) return;
    char loss[32];
    format_loss(r->loss, loss, sizeof loss);
    fprintf(p->out, "epoch %d/%d step %lld/%lld loss %s%s %.0f samples/s eta %s%s\n", r->epoch,
            r->epochs, (long long)r->step, (long long)r->total_steps, loss, lr, r->samples_per_s,
            eta,
            r->step == r->total_steps ? " (done)"
            : r->epoch_done           ? " (epoch done)"
                                      : "");
    fflush(p->out);
}

void bg_progress_end_line(bg_progress_t *p) {
    if (!p->line_open) return;
    fputc('\n', p->out);
    p->line_open = 0;
}

void bg_progress_tick(bg_progress_t *p, int64_t done) {
    if (!p->terminal) return;
    const double now = bg_monotonic_seconds(), elapsed = now - p->started;
    if (elapsed < p->quiet_s || now - p->last_draw < 0.1) return;
    p->last_draw = now;
    char took[32];
    format_duration(elapsed, took, sizeof took);
    fprintf(p->out, "\r\033[K%s %lld so far, %s", p->what, (long long)done, took);
    p->line_open = 1;
    fflush(p->out);
}

void bg_progress_clear_line(bg_progress_t *p) {
    if (!p->line_open) return;
    fputs("\r\033[K", p->out);
    p->line_open = 0;
}
