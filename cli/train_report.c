/* What brigade train prints and writes once a run ends: the test result,
 * the closing lines, each stage's memory, the recorded steps' summary, the
 * metrics JSON, and the reports of a failed save or a failed run. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "planning.h"
#include "report.h"
#include "text_file.h"
#include "text_table.h"
#include "train_report.h"

int bg_cli_train_seed_unused(const train_options_t *o) {
    return o->train.evaluate_only && o->load != NULL && strcmp(o->data, "synthetic") != 0;
}

void bg_cli_train_print_stages(const bg_train_result_t *r) {
    static const bg_text_column_t columns[] = {
        {"stage", 'r', 5, 0},      {"layers", 'l', 8, 2},    {"device", 'l', 10, 1},
        {"peak MiB", 'r', 10, 1},  {"params", 'r', 10, 1},   {"grads", 'r', 10, 1},
        {"optimizer", 'r', 10, 1}, {"stash", 'r', 10, 1},    {"buffers", 'r', 10, 1},
        {"other", 'r', 10, 1},     {"in-flight", 'r', 9, 1},
    };
    bg_text_table_t *t = NULL;
    if (bg_text_table_create(columns, (int)(sizeof columns / sizeof columns[0]), &t) != BG_OK) {
        printf("(no table: %s)\n", bg_error_message());
        return;
    }
    const double mib = 1024.0 * 1024.0;
    for (int s = 0; s < r->stages; s++) {
        const bg_pipeline_stage_info_t *info = &r->stage_info[s];
        const bg_stage_memory_t *m = &info->memory;
        bg_text_table_add(t, "%d", s);
        bg_text_table_add(t, "%d-%d", info->first_layer, info->last_layer - 1);
        bg_text_table_add(t, "%s", info->device_name);
        const size_t bytes[] = {bg_pipeline_stage_peak_bytes(info),
                                m->params,
                                m->grads,
                                m->optimizer,
                                m->stash_peak,
                                m->buffers,
                                m->workspace + m->padding + info->channel_bytes +
                                    info->channel_padding};
        for (size_t k = 0; k < sizeof bytes / sizeof bytes[0]; k++)
            bg_text_table_add(t, "%.2f", (double)bytes[k] / mib);
        bg_text_table_add(t, "%d", m->peak_in_flight);
    }
    bg_text_table_print(t, stdout);
    bg_text_table_destroy(t);
    printf("(peak MiB is the sum of the columns from params to other; other: the slots of the "
           "channels into the stage, the ops' workspace and the padding of each buffer to 256 "
           "bytes; in-flight: the most micro-batches whose activations the stage held at "
           "once)\n");
}

void bg_cli_train_report_failed_save(const train_options_t *o, const bg_train_result_t *r,
                                     int64_t total) {
    const long long failed = (long long)r->save_failed_step;
    /* The error names the file: shown as every name is (bg_cli_shown). */
    char error[BG_CLI_SHOWN_MAX];
    const char *why = bg_cli_shown(r->save_error, error, sizeof error);
    if (failed == total)
        fprintf(stderr, "brigade train: the final training state (step %lld) was not saved: %s",
                failed, why);
    else if (bg_cli_stop_signal != 0) /* the save a stop signal asked for */
        fprintf(stderr,
                "brigade train: interrupted by signal %d (%s) after step %lld of %lld, whose "
                "training state was not saved: %s",
                (int)bg_cli_stop_signal, strsignal(bg_cli_stop_signal), failed, (long long)total,
                why);
    else
        fprintf(stderr,
                "brigade train: stopped after step %lld of %lld, whose training state was not "
                "saved: %s",
                failed, (long long)total, why);
    char words[BG_ERROR_MAX], shown[BG_CLI_SHOWN_MAX], words_shown[BG_ERROR_MAX];
    const char *save = bg_cli_shown(o->save, shown, sizeof shown);
    if (r->saved_step > 0 && access(o->save, R_OK) != 0) /* its folder went away */
        fprintf(stderr, "; %s, which held step %lld, is gone too: nothing of this run is saved\n",
                save, (long long)r->saved_step);
    else if (r->saved_step > 0)
        fprintf(stderr, "; %s\n",
                bg_cli_shown(bg_train_saved_words(o->save, r->saved_step, 0, words, sizeof words),
                             words_shown, sizeof words_shown));
    else if (o->resume != NULL && bg_cli_same_file(o->save, o->resume))
        /* Written whole or not at all: it holds what the run began from. */
        fprintf(stderr, "; %s still holds step %lld, which this run resumed from\n", save,
                (long long)r->first_step);
    else
        fprintf(stderr, "; nothing of this run is saved\n");
}

void bg_cli_train_report_unwritten(const train_options_t *o, const char *why) {
    const char *option[] = {"--metrics", "--trace", "--timeline"};
    const char *path[] = {o->metrics, o->trace, o->timeline};
    int total = 0, there = 0; /* there: paths that hold a file, an earlier run's */
    for (int i = 0; i < 3; i++) {
        total += path[i] != NULL;
        there += path[i] != NULL && strcmp(path[i], "-") != 0 && access(path[i], F_OK) == 0;
    }
    char list[3 * (BG_CLI_SHOWN_MAX + 16)] = "", shown[BG_CLI_SHOWN_MAX];
    size_t used = 0;
    int count = 0;
    for (int i = 0; i < 3; i++) {
        if (path[i] == NULL) continue;
        const char *before = count == 0 ? "" : count == total - 1 ? " and " : ", ";
        int n = snprintf(list + used, sizeof list - used, "%s%s %s", before, option[i],
                         bg_cli_shown(path[i], shown, sizeof shown));
        if (n > 0 && (size_t)n < sizeof list - used) used += (size_t)n;
        count++;
    }
    if (count > 0)
        fprintf(stderr, "brigade train: the run %s, so %s %s not written%s\n", why, list,
                count == 1 ? "was" : "were",
                there == 0   ? ""
                : count == 1 ? " (the file there is an earlier run's)"
                             : " (a file there is an earlier run's)");
}

bg_status_t bg_cli_train_write_metrics(const char *path, const train_options_t *o,
                                       const bg_train_result_t *r,
                                       const bg_timeline_summary_t *summary) {
    cJSON *root = cJSON_CreateObject();
    if (root == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory writing metrics");
    cJSON_AddStringToObject(root, "model", o->model);
    cJSON_AddStringToObject(root, "data", o->data);
    if (o->load != NULL) cJSON_AddStringToObject(root, "load", o->load);
    if (o->resume != NULL) cJSON_AddStringToObject(root, "resume", o->resume);
    if (!o->train.evaluate_only) { /* which updates nothing */
        const bg_optimizer_config_t *optimizer = &o->train.optimizer;
        cJSON_AddStringToObject(root, "optimizer", bg_optimizer_kind_name(optimizer->kind));
        cJSON_AddNumberToObject(root, "lr", bg_optimizer_lr(optimizer));
        /* The rule's other settings, as the header line names them. */
        if (optimizer->kind == BG_OPTIMIZER_SGD) {
            const bg_sgd_config_t *sgd = &optimizer->sgd;
            cJSON_AddNumberToObject(root, "momentum", sgd->momentum);
            cJSON_AddNumberToObject(root, "dampening", sgd->dampening);
            cJSON_AddBoolToObject(root, "nesterov", sgd->nesterov);
            cJSON_AddNumberToObject(root, "weight_decay", sgd->weight_decay);
        } else {
            const bg_adam_config_t *adam = &optimizer->adam;
            cJSON_AddNumberToObject(root, "beta1", adam->beta1);
            cJSON_AddNumberToObject(root, "beta2", adam->beta2);
            cJSON_AddNumberToObject(root, "eps", adam->eps);
            cJSON_AddNumberToObject(root, "weight_decay", adam->weight_decay);
        }
        cJSON *schedule = cJSON_AddObjectToObject(root, "lr_schedule");
        cJSON_AddStringToObject(schedule, "kind",
                                bg_lr_schedule_kind_name(optimizer->schedule.kind));
        cJSON_AddNumberToObject(schedule, "warmup_steps", (double)optimizer->schedule.warmup_steps);
        cJSON_AddNumberToObject(schedule, "min_lr", optimizer->schedule.min_lr);
        if (r->last_lr >= 0) cJSON_AddNumberToObject(schedule, "last_lr", r->last_lr);
        if (o->train.clip_grad_norm > 0) {
            cJSON_AddNumberToObject(root, "clip_grad_norm", o->train.clip_grad_norm);
            cJSON_AddNumberToObject(root, "clipped_steps", (double)r->clipped_steps);
            cJSON_AddNumberToObject(root, "grad_norm", r->grad_norm);
        }
    }
    cJSON_AddNumberToObject(root, "batch", (double)o->train.batch);
    if (bg_cli_train_seed_unused(o))
        cJSON_AddNullToObject(root, "seed");
    else
        bg_cli_json_add_uint(root, "seed", o->train.seed);
    cJSON_AddNumberToObject(root, "steps", (double)r->steps);
    cJSON_AddNumberToObject(root, "first_step", (double)r->first_step);
    if (o->save != NULL) {
        cJSON_AddNumberToObject(root, "saved_step", (double)r->saved_step);
        if (r->save_failed_step > 0) {
            cJSON_AddNumberToObject(root, "save_failed_step", (double)r->save_failed_step);
            cJSON_AddStringToObject(root, "save_error", r->save_error);
        }
    }
    /* A run of --steps 0 has no training figures, rather than zeros. */
    if (!o->train.evaluate_only) {
        cJSON_AddNumberToObject(root, "loss", r->loss);
        /* The whole run's, a resumed one's included, as the text says it. */
        cJSON_AddNumberToObject(root, "skipped_steps", (double)r->skipped_steps);
    }
    cJSON_AddNumberToObject(root, "test_loss", r->test_loss);
    cJSON_AddNumberToObject(root, "test_accuracy", r->test_accuracy);
    cJSON_AddNumberToObject(root, "test_samples",
                            (double)(o->test_samples > 0 ? o->test_samples : o->test_count));
    if (!o->train.evaluate_only) {
        cJSON_AddNumberToObject(root, "samples_per_s", r->samples_per_s);
        cJSON_AddNumberToObject(root, "train_seconds", r->train_seconds);
        if (o->save != NULL) cJSON_AddNumberToObject(root, "save_seconds", r->save_seconds);
    }
    /* An evaluation's forwards run in the same order under every schedule
     * (only interleaved's stages a device change where), and keep nothing
     * to recompute. */
    if (!o->train.evaluate_only || o->placement.chunks > 1)
        cJSON_AddStringToObject(root, "schedule", bg_schedule_kind_name(o->placement.schedule));
    cJSON_AddNumberToObject(root, "microbatches", o->placement.microbatches);
    if (!o->train.evaluate_only) cJSON_AddBoolToObject(root, "recompute", o->placement.recompute);
    if (o->placement.reversed) cJSON_AddTrueToObject(root, "devices_reversed");
    cJSON *stages = cJSON_AddArrayToObject(root, "stages");
    for (int s = 0; stages != NULL && s < r->stages; s++)
        cJSON_AddItemToArray(stages, bg_cli_run_stage_json(&r->stage_info[s]));
    if (o->placement.chunks > 1 &&
        bg_cli_run_devices_json(root, r->stage_info, r->stages) != BG_OK) {
        cJSON_Delete(root);
        return bg_error_set(BG_ERR_NOMEM, "out of memory writing metrics");
    }
    if (summary != NULL) {
        cJSON *timeline = cJSON_AddObjectToObject(root, "timeline");
        bg_status_t st = timeline ? bg_summary_to_json(summary, timeline) : BG_ERR_NOMEM;
        if (st != BG_OK) {
            cJSON_Delete(root);
            return st == BG_ERR_NOMEM ? bg_error_set(st, "out of memory writing metrics") : st;
        }
    }
    char *text = bg_cli_json_print(root);
    cJSON_Delete(root);
    if (text == NULL) return bg_error_set(BG_ERR_NOMEM, "out of memory writing metrics");
    bg_status_t st = bg_text_file_write(path, text, "metrics");
    free(text);
    return st;
}

/* `seconds` on stdout as the closing line says a time: in milliseconds
 * below a second ("0.0 s" would say nothing). */
static void print_duration(double seconds) {
    if (seconds < 1)
        printf("%.0f ms", seconds * 1e3);
    else
        printf("%.1f s", seconds);
}

void bg_cli_train_print_test(const train_options_t *o, const bg_train_result_t *r) {
    char scored[96] = "", loss[32]; /* --test-samples, short of the whole set */
    const int part = o->test_samples > 0 && o->test_samples < o->test_count;
    if (part && o->test_samples == 1)
        snprintf(scored, sizeof scored, "; the first of %lld test samples",
                 (long long)o->test_count);
    else if (part)
        snprintf(scored, sizeof scored, "; the first %lld of %lld test samples",
                 (long long)o->test_samples, (long long)o->test_count);
    if (isfinite(r->test_loss))
        printf("test accuracy: %.4f (test loss %s%s)\n", r->test_accuracy,
               bg_cli_loss(r->test_loss, loss, sizeof loss), scored);
    else
        printf("test accuracy: %.4f (test loss not finite%s)\n", r->test_accuracy, scored);
}

void bg_cli_train_print_trained(const train_options_t *o, const bg_train_result_t *r) {
    char loss[32];
    const long long ran = (long long)(r->steps - r->first_step);
    /* Steps skipped for non-finite values ran, and updated nothing. */
    const long long skipped_here = ran - (long long)r->taken_steps;
    char range[64] = "";
    if (r->first_step > 0)
        snprintf(range, sizeof range, " (%lld to %lld of the run)", (long long)r->first_step + 1,
                 (long long)r->steps);
    if (skipped_here == 0)
        printf("trained %lld step%s%s", ran, ran == 1 ? "" : "s", range);
    else if (skipped_here == ran)
        printf("ran %lld step%s%s, %sskipped (no update)", ran, ran == 1 ? "" : "s", range,
               ran == 1 ? "" : "all ");
    else
        printf("ran %lld steps%s, %lld of them skipped (no update)", ran, range, skipped_here);
    /* The checkpoints' writes are not the steps': said apart. */
    printf(" in ");
    print_duration(r->train_seconds);
    if (r->save_seconds > 0) {
        printf(" (and ");
        print_duration(r->save_seconds);
        printf(" writing checkpoints)");
    }
    if (isnan(r->loss))
        printf(": %.0f samples/s; no step of the last epoch counted (all skipped, below)\n",
               r->samples_per_s);
    else
        printf(": %.0f samples/s, last epoch's mean loss %s\n", r->samples_per_s,
               bg_cli_loss(r->loss, loss, sizeof loss));
    if (o->train.clip_grad_norm > 0 && r->taken_steps > 0)
        printf("gradients clipped to norm %g in %lld of the %lld step%s taken; the last one's "
               "norm %g\n",
               o->train.clip_grad_norm, (long long)r->clipped_steps, (long long)r->taken_steps,
               r->taken_steps == 1 ? "" : "s", r->grad_norm);
    if (r->skipped_steps > 0 && r->nan_report[0] != '\0')
        printf("skipped %lld step%s for non-finite values; the last at %s\n",
               (long long)r->skipped_steps, r->skipped_steps == 1 ? "" : "s", r->nan_report);
    else if (r->skipped_steps > 0) /* counted by the run this one resumed */
        printf("skipped %lld step%s for non-finite values, all before step %lld, where this "
               "process resumed the run\n",
               (long long)r->skipped_steps, r->skipped_steps == 1 ? "" : "s",
               (long long)r->first_step + 1);
}

/* "st", "nd", "rd" or "th" after n. */
static const char *ordinal_suffix(int64_t n) {
    if (n % 100 >= 11 && n % 100 <= 13) return "th";
    return n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
}

int64_t bg_cli_train_empty_microbatches(const train_options_t *o, int64_t count) {
    const int64_t rest = count % o->train.batch, m = o->placement.microbatches;
    return rest > 0 && rest < m ? m - rest : 0;
}

/* Says which recorded steps took an epoch's last batch, shorter than the
 * others where the batch does not divide the training set (a new user read
 * the last step of an epoch of 60,000 at batch 64, 32 samples, as a fast
 * one): their figures are a short step's, in the summary's means too. */
static void note_short_steps(const train_options_t *o, const bg_timeline_t *tl) {
    const int64_t batch = o->train.batch, count = o->train.train->count;
    const int64_t per_epoch = bg_train_steps_per_epoch(count, batch), rest = count % batch;
    if (rest == 0 || tl->first_step <= 0) return;
    /* The epochs' last steps among the recorded: every per_epoch-th. */
    int64_t first = 0, last = 0, shorts = 0;
    for (int j = 0; j < tl->steps; j++) {
        const int64_t run_step = bg_timeline_run_step(tl, j); /* from 1 */
        if (run_step % per_epoch != 0) continue;
        if (shorts++ == 0) first = run_step;
        last = run_step;
    }
    if (shorts == 0) return;
    /* Up to 4 by number, more as a range (a run of 100 recorded steps of
     * 2 an epoch has 50). */
    char steps[160];
    size_t at = 0;
    if (shorts <= 4)
        for (int64_t s = first; s <= last && at < sizeof steps; s += per_epoch)
            at += (size_t)snprintf(steps + at, sizeof steps - at, "%s%lld", s > first ? ", " : "",
                                   (long long)s);
    else
        snprintf(steps, sizeof steps, "%lld, %lld, ..., %lld, every %lld%s and %lld in all,",
                 (long long)first, (long long)(first + per_epoch), (long long)last,
                 (long long)per_epoch, ordinal_suffix(per_epoch), (long long)shorts);
    char rest_text[32], count_text[32], batch_text[32], empty[80] = "";
    const int64_t empty_count = bg_cli_train_empty_microbatches(o, count);
    if (empty_count > 0)
        snprintf(empty, sizeof empty, ", %lld of its %lld micro-batches empty",
                 (long long)empty_count, (long long)o->placement.microbatches);
    printf("(step%s %s %stook an epoch's last batch, %s of its %s samples where the others take "
           "%s%s: %s, %s)\n",
           shorts > 1 ? "s" : "", steps, shorts > 1 ? "each " : "",
           bg_cli_group_digits(rest, rest_text, sizeof rest_text),
           bg_cli_group_digits(count, count_text, sizeof count_text),
           bg_cli_group_digits(batch, batch_text, sizeof batch_text), empty,
           shorts > 1 ? "short steps" : "a short step",
           tl->steps == 1 ? "which --trace and --timeline show too"
                          : "counted in the means below, and in --trace and --timeline");
}

bg_status_t bg_cli_train_print_recorded(const train_options_t *o, const bg_train_result_t *r,
                                        bg_timeline_summary_t **summary) {
    size_t *peaks = calloc((size_t)r->stages, sizeof *peaks);
    if (peaks == NULL)
        return bg_error_set(BG_ERR_NOMEM, "out of memory summarizing the recorded steps");
    for (int s = 0; s < r->stages; s++) peaks[s] = bg_pipeline_stage_peak_bytes(&r->stage_info[s]);
    bg_status_t st = bg_timeline_summarize(r->timeline, summary);
    if (st == BG_OK) {
        const int n = r->timeline->steps;
        const long long from = (long long)r->timeline->first_step;
        if (n > 1)
            printf("\nlast %d steps (%lld to %lld of the run), as recorded; ms and %% per step, "
                   "their mean:\n",
                   n, from, from + n - 1);
        else
            printf("\nlast step (%lld of the run), as recorded:\n", from);
        note_short_steps(o, r->timeline);
        st = bg_summary_print(stdout, *summary, peaks);
    }
    free(peaks);
    return st;
}
