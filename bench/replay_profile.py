#!/usr/bin/env python3
"""A profile holding a measured run's own op times, for a replay.

    replay_profile.py PROFILE TRACE SPLIT OUT

PROFILE is a `brigade profile` of the model (version 2), TRACE the Chrome
trace of a two-stage `brigade train --split SPLIT --trace TRACE` run on the
CPU, OUT the profile to write. Every stage entry of PROFILE for the run's two
layer ranges, [0, SPLIT) and [SPLIT, layers), at any number of slots, takes
the run's mean per micro-batch over the recorded steps: forward and backward
(the F and B ops; a step's last B, which also checks the weight gradients,
apart: what it takes beyond the others is the check, weight_check_s, unless
a step has one B only, when the check stays in the backward's mean),
update (the step op), each copy (the send and recv lanes, less the wake
of a sleeping peer at their end, the args' wake_us; sends that first waited
for room count only their copy) and each NaN/Inf check (the end of the op
whose output it checks, its args' check_us, taken out of the op's time as
the profile times it apart). The figures under
load are zeroed and those after a wait dropped, so the simulator does not
stretch times that were measured with the other stage running already, or
after the waits they had; hand-off and wake stay the profile's.

`brigade simulate --split SPLIT --profile OUT` then predicts the run from its
own op times: what is left of the error is the simulator's model of the
schedule (waits, rings, hand-offs, the optimizer barrier), apart from how far
the run's op speed moved from the profile's. bench/sim_accuracy.sh prints it
with REPLAY=1.
"""
import json
import statistics
import sys


def mean(values, what):
    if not values:
        sys.exit("replay_profile: the trace has no %s" % what)
    return statistics.fmean(values)


def stage_figures(events, stage, last_stage):
    """The run's per-micro-batch means for one stage (a device of its own)."""
    mine = sorted((e for e in events if e["args"]["stage"] == stage), key=lambda e: e["ts"])

    def tail(e):
        """What ends an event apart from its own work: an op's check of what
        it sends, a copy's wake of a sleeping peer (seconds)."""
        return (e["args"].get("check_us", 0) + e["args"].get("wake_us", 0)) * 1e-6

    def durations(cat, prefix=""):
        return [e["dur"] * 1e-6 - tail(e) for e in mine
                if e["cat"] == cat and e["name"].startswith(prefix)]

    def checks(op_cat):
        """The check at the end of each op of op_cat."""
        return [e["args"].get("check_us", 0) * 1e-6 for e in mine if e["cat"] == op_cat]

    def backward_and_check():
        """The mean B but a step's last, and how much longer the last ran."""
        by_step = {}
        for e in mine:
            if e["cat"] == "B":
                by_step.setdefault(e["args"]["step"], []).append(e["dur"] * 1e-6 - tail(e))
        if not by_step or min(len(b) for b in by_step.values()) < 2:
            return mean(durations("B"), "backward of stage %d" % stage), 0.0
        backward = statistics.fmean(d for b in by_step.values() for d in b[:-1])
        last = statistics.fmean(b[-1] for b in by_step.values())
        return backward, max(0.0, last - backward)

    backward, weight_check = backward_and_check()
    f = {
        "forward_s": mean(durations("F"), "forward of stage %d" % stage),
        "backward_s": backward,
        "weight_check_s": weight_check,
        "update_s": mean(durations("step"), "optimizer step of stage %d" % stage),
        "recv_s": 0.0, "send_s": 0.0, "grad_recv_s": 0.0, "grad_send_s": 0.0,
        "check_s": 0.0, "grad_check_s": 0.0,
    }
    if stage < last_stage:
        f["send_s"] = mean(durations("send", "send F"), "activation send of stage %d" % stage)
        f["grad_recv_s"] = mean(durations("recv", "recv B"), "gradient receive of stage %d" % stage)
        f["check_s"] = mean(checks("F"), "activation check of stage %d" % stage)
    if stage > 0:
        f["recv_s"] = mean(durations("recv", "recv F"), "activation receive of stage %d" % stage)
        f["grad_send_s"] = mean(durations("send", "send B"), "gradient send of stage %d" % stage)
        f["grad_check_s"] = mean(checks("B"), "gradient check of stage %d" % stage)
    return f


def main(argv):
    if len(argv) != 5:
        sys.exit("usage: replay_profile.py PROFILE TRACE SPLIT OUT")
    profile_path, trace_path, split, out_path = argv[1], argv[2], int(argv[3]), argv[4]
    with open(profile_path) as f:
        profile = json.load(f)
    with open(trace_path) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    events = [e for e in events if e.get("ph") == "X" and "stage" in e.get("args", {})]
    layers = len(profile["layers"])
    if not 0 < split < layers:
        sys.exit("replay_profile: split %d outside 1..%d" % (split, layers - 1))
    stages = sorted({e["args"]["stage"] for e in events if e["args"]["stage"] >= 0})
    if stages != [0, 1]:
        sys.exit("replay_profile: %s holds stages %s; a replay needs a two-stage run"
                 % (trace_path, stages))
    ranges = {(0, split): stage_figures(events, 0, 1), (split, layers): stage_figures(events, 1, 1)}
    replaced = 0
    for entry in profile.get("stages", []):
        figures = ranges.get((entry["first"], entry["last"]))
        if figures is None:
            continue
        entry.update(figures)
        entry["loaded"] = {"forward_s": 0.0, "backward_s": 0.0, "update_s": 0.0, "copies_s": 0.0}
        entry.pop("after_wait", None)
        replaced += 1
    if replaced == 0:
        sys.exit("replay_profile: %s has no stage entries for layers 0..%d and %d..%d"
                 % (profile_path, split - 1, split, layers - 1))
    with open(out_path, "w") as f:
        json.dump(profile, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
