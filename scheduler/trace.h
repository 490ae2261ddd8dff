/* Chrome trace event JSON of a timeline, for Perfetto (ui.perfetto.dev)
 * and chrome://tracing.
 *
 * Layout: one process per device (pid = device index, named by a
 * process_name metadata event after the device), and in it per stage up to
 * four threads (bg_trace_lane): its compute ops ("stage N": F, B, W and the
 * optimizer step), its transfers ("stage N transfers": sends, receives and
 * waits), and tensors crossing the link into it on the device's copy
 * engine from the stage before and the stage after ("stage N link from
 * stage P"; LINK events, which overlap the ops). Every event is a complete
 * ("X") event with ts and dur in microseconds from the timeline's origin
 * (to the nanosecond), named "F3", "B3", "W3", "step", "send F3 to stage
 * 2", "recv B3 from stage 2", "wait for F3 from stage 1", "F3 from stage
 * 1", its category the kind's short name (bg_event_kind_name), and args
 * {stage, microbatch, step}, run_step where the timeline knows the run's
 * step numbers, and peer_stage for transfers and links. An optimizer
 * step recorded without a stage (-1) goes on the device's own lane (the
 * lanes of stage `device`). */
#ifndef BG_TRACE_H
#define BG_TRACE_H

#include "timeline.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The lanes of a stage, in the order shown: tid = BG_TRACE_LANES x stage +
 * one of these. */
enum {
    BG_TRACE_LANE_OPS,       /* F, B, W, step */
    BG_TRACE_LANE_TRANSFERS, /* send, recv, wait */
    BG_TRACE_LANE_LINK_PREV, /* link from the stage before */
    BG_TRACE_LANE_LINK_NEXT, /* link from the stage after */
    BG_TRACE_LANES
};

/* The thread (tid) an event is drawn on in its device's process. */
int bg_trace_lane(const bg_event_t *e);

/* Writes tl as {"traceEvents": [...], "displayTimeUnit": "ms"} to path,
 * replacing the file. BG_ERR_INVALID for NULL arguments; BG_ERR_IO naming
 * the path when it cannot be written (a partial file may remain);
 * BG_ERR_NOMEM if building the JSON fails. */
bg_status_t bg_trace_write(const char *path, const bg_timeline_t *tl);

#ifdef __cplusplus
}
#endif

#endif /* BG_TRACE_H */
