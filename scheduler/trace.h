/* Chrome trace event JSON of a timeline, for Perfetto (ui.perfetto.dev)
 * and chrome://tracing.
 *
 * Layout: one process per device (pid = device index, named by a
 * process_name metadata event after the device), and in it one thread per
 * stage for compute ops (tid = stage, "stage N": F, B, W and the optimizer
 * step) and one per stage for its transfers (tid = 1000 + stage, "stage N
 * transfers": sends, receives and waits). Every event is a complete ("X")
 * event with ts and dur in microseconds from the timeline's origin (to the
 * nanosecond), named
 * "F3", "B3", "W3", "step", "send F3 to stage 2", "recv B3 from stage 2",
 * "wait for stage 1", its category the kind's short name
 * (bg_event_kind_name), and args {stage, microbatch, step} plus peer_stage
 * for transfers. An optimizer step recorded without a stage (-1) goes on
 * the device's own lane (tid = device). */
#ifndef BG_TRACE_H
#define BG_TRACE_H

#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Lane of a stage's transfers: tid BG_TRACE_TRANSFER_TID + stage. */
#define BG_TRACE_TRANSFER_TID 1000

/* Writes tl as {"traceEvents": [...], "displayTimeUnit": "ms"} to path,
 * replacing the file. BG_ERR_INVALID for NULL arguments; BG_ERR_IO naming
 * the path when it cannot be written (a partial file may remain);
 * BG_ERR_NOMEM if building the JSON fails. */
bg_status_t bg_trace_write(const char *path, const bg_timeline_t *tl);

#ifdef __cplusplus
}
#endif

#endif /* BG_TRACE_H */
