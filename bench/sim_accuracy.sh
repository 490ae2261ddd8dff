#!/bin/sh
# Simulator accuracy on the CPU backend (issue 5's bar): with a profile
# measured on this machine, is the simulated step within 5% of the measured
# one and the simulated bubble within 2 points, for GPipe and 1F1B at K = 2
# CPU devices and M in {1, 2, 4, 8}?
#
# For each model and M the split is the planner's (from one `brigade
# profile` of every layer range at the micro-batch size, --devices cpu:2,
# read from simulate's metrics) or SPLIT. Then REPEAT times in turn, for
# each schedule: `brigade profile --split` of that split's stages (a few
# seconds), `brigade simulate` with it, and a measured `brigade train
# --data synthetic` on the same split, STEPS steps of which the last
# RECORD are recorded. A measured figure is the median over the recorded
# steps (step_median_s, bubble_median of --metrics); both the measured and
# the simulated figures are then averaged over the REPEAT turns. This
# machine's cores change speed for seconds at a time
# (docs/sim-accuracy-log.md), so each run's profile is taken right before
# it (a profile of every range takes a minute, and timed the run's stages
# up to a minute before it), and the averages follow the long-run speed a
# training job sees. Prints one row per point with both figures, the
# errors and the spread of the measured step over the turns ((max - min) /
# mean), then the turns' own errors (each turn's simulation against its
# run: their range, and their mean with a 95% interval, which says whether
# the turns were enough to decide the point), and per model how many of
# its points meet the bar and a noise
# check: at M = 1 GPipe and 1F1B are one schedule, so the gap between their
# measured steps is what this machine alone moves a figure by.
#
#   [MODELS="examples/fashion_cnn.model examples/conv_balanced.model:4"]
#   [STEPS=600 RECORD=500 REPEAT=3 REPETITIONS=9 MS="1 2 4 8" BREAKDOWN=0 REPLAY=0 ABLATE=0
#    BRACKET=0]
#   bench/sim_accuracy.sh [BUILD_DIR]
#
# MS picks the micro-batch counts (the bar counts only points run); with
# BREAKDOWN=1 each point is followed by its stages' forward, backward, copy
# and wait time per step, measured and simulated, averaged over the turns:
# where a point's error comes from. With REPLAY=1 each run also writes a
# trace, and each point is followed by a replay: the simulation of the run
# from the run's own mean op and copy times (bench/replay_profile.py), whose
# error is the simulator's model of the schedule alone, apart from how far
# the run's speed moved from the profile's. With ABLATE=1 each point is
# also simulated from its profiles without their after_wait entries: what
# the simulator predicts without slowing ops after an idle gap. With
# BRACKET=1 each run's stages are profiled again right after it, and the
# turn's simulation is the mean of the simulations from the two profiles
# (a drift of the machine's speed during the turn then cancels); each
# point is followed by how far the before and after simulations were
# apart.
#
# MODELS lists model specs, each optionally with :SPLIT (the first layer of
# stage 1; default: the planner's split). The build folder defaults to
# build; nothing is built here. The machine should be otherwise idle (the
# script prints the load before and after): every figure moves with it.
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
brigade="$build/cli/brigade"
models=${MODELS:-"examples/fashion_cnn.model examples/conv_balanced.model:4"}
ms=${MS:-"1 2 4 8"}
breakdown=${BREAKDOWN:-0}
replay=${REPLAY:-0}
ablate=${ABLATE:-0}
bracket=${BRACKET:-0}
# A run of about five seconds: its median step then covers the machine's
# changes of speed over seconds as the profile's passes do (a run of 80
# steps, under a second, caught whichever speed its second had).
steps=${STEPS:-600}
record=${RECORD:-500}
repeat=${REPEAT:-3}
repetitions=${REPETITIONS:-9}
batch=64
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# json FILE EXPRESSION: prints EXPRESSION evaluated on FILE's JSON (bound to p).
json() {
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
print($2)" "$1"
}

# profile_and_simulate PROFILE METRICS: profiles this turn's split (its
# stages only, seconds long) into PROFILE, simulates the turn's placement
# from it into METRICS, and prints the simulated step and bubble.
profile_and_simulate() {
    "$brigade" profile "$model" --batch $batch --microbatches "$m" --devices cpu:2 \
        --repetitions "$repetitions" --split "$cut" -o "$1" >/dev/null 2>&1
    # shellcheck disable=SC2086
    "$brigade" simulate "$model" $placement --split "$cut" --profile "$1" \
        --metrics "$2" >/dev/null
    json "$2" '"%r %r" % (p["timeline"]["step_s"], p["timeline"]["bubble_measured"])'
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) ($(getconf _NPROCESSORS_ONLN) cores)"
printf '%-22s %-6s %3s %5s | %9s %7s %9s %7s | %8s %8s %7s | %s\n' model schedule M split \
    "meas ms" "spread" "sim ms" "err %" "meas bub" "sim bub" "err pt" bar
for entry in $models; do
    model=${entry%%:*}
    split=
    [ "$entry" != "$model" ] && split=${entry#*:}
    name=$(basename "$model" .model)
    met=0
    for m in $ms; do
        for schedule in gpipe 1f1b; do
            : >"$work/runs.$schedule"
            : >"$work/sims.$schedule"
            : >"$work/parts.$schedule"
            : >"$work/replays.$schedule"
            : >"$work/plain.$schedule"
            : >"$work/brackets.$schedule"
            echo "$split" >"$work/cut.$schedule"
        done
        run=0
        while [ $run -lt "$repeat" ]; do
            for schedule in gpipe 1f1b; do
                placement="--devices cpu:2 --batch $batch --microbatches $m --schedule $schedule"
                cut=$(cat "$work/cut.$schedule")
                if [ -z "$cut" ]; then
                    # The planner's split, from a profile of every layer
                    # range, once per point (not compared: the runs'
                    # profiles below are of their split only).
                    full="$work/$name.m$m.full.json"
                    [ -f "$full" ] || "$brigade" profile "$model" --batch $batch \
                        --microbatches "$m" --devices cpu:2 --repetitions "$repetitions" \
                        -o "$full" >/dev/null 2>&1
                    # shellcheck disable=SC2086
                    "$brigade" simulate "$model" $placement --profile "$full" \
                        --metrics "$work/plan.json" >/dev/null
                    json "$work/plan.json" 'p["stages"][1]["layers"][0]' >"$work/cut.$schedule"
                    cut=$(cat "$work/cut.$schedule")
                fi
                # This run's profile, taken right before the run it is
                # compared with.
                profile="$work/$name.m$m.profile.json"
                sim=$(profile_and_simulate "$profile" "$work/sim.json")
                if [ "$ablate" = 1 ]; then
                    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
for entry in p.get('stages', []):
    entry.pop('after_wait', None)
json.dump(p, open(sys.argv[2], 'w'))" "$profile" "$work/plain.profile.json"
                    # shellcheck disable=SC2086
                    "$brigade" simulate "$model" $placement --split "$cut" \
                        --profile "$work/plain.profile.json" --metrics "$work/plain.json" >/dev/null
                    json "$work/plain.json" \
                        '"%r %r" % (p["timeline"]["step_s"], p["timeline"]["bubble_measured"])' \
                        >>"$work/plain.$schedule"
                fi
                trace=
                [ "$replay" = 1 ] && trace="--trace $work/train.trace.json"
                # shellcheck disable=SC2086
                "$brigade" train "$model" --data synthetic --steps "$steps" \
                    --record-steps "$record" $placement --split "$cut" \
                    --metrics "$work/train.json" $trace >/dev/null 2>&1
                if [ "$replay" = 1 ]; then
                    python3 bench/replay_profile.py "$profile" "$work/train.trace.json" "$cut" \
                        "$work/replay.profile.json"
                    # shellcheck disable=SC2086
                    "$brigade" simulate "$model" $placement --split "$cut" \
                        --profile "$work/replay.profile.json" --metrics "$work/replay.json" >/dev/null
                    json "$work/replay.json" \
                        '"%r %r" % (p["timeline"]["step_s"], p["timeline"]["bubble_measured"])' \
                        >>"$work/replays.$schedule"
                fi
                json "$work/train.json" \
                    '"%r %r" % (p["timeline"]["step_median_s"], p["timeline"]["bubble_median"])' \
                    >>"$work/runs.$schedule"
                if [ "$bracket" = 1 ]; then
                    # The same profile right after the run: the turn's
                    # simulation is the mean of the two, as the run lay
                    # between them.
                    sim="$sim $(profile_and_simulate "$work/after.profile.json" "$work/after.json")"
                    echo "$sim" >>"$work/brackets.$schedule"
                    sim=$(echo "$sim" | awk '{printf "%.9g %.9g", ($1 + $3) / 2, ($2 + $4) / 2}')
                fi
                echo "$sim" >>"$work/sims.$schedule"
                # Each stage's forward, backward, copy and wait per step,
                # measured then simulated, for the breakdown.
                json "$work/train.json" "' '.join('%r %r %r %r' % (s['forward_s'], s['backward_s'],
    s['copy_s'], s['wait_prev_s'] + s['wait_next_s']) for s in p['timeline']['stages'] + json.load(open('$work/sim.json'))['timeline']['stages'])" \
                    >>"$work/parts.$schedule"
            done
            run=$((run + 1))
        done
        for schedule in gpipe 1f1b; do
            # shellcheck disable=SC2016 # awk programs, not shell
            mean='{s += $1; b += $2} END {printf "%.9g %.9g ", s / NR, b / NR}'
            # shellcheck disable=SC2016
            range='NR == 1 || $1 < lo {lo = $1} NR == 1 || $1 > hi {hi = $1} END {printf "%.9g %.9g", lo, hi}'
            row="$(awk "$mean" "$work/runs.$schedule")$(awk "$mean" "$work/sims.$schedule")"
            row="$row$(awk "$range" "$work/runs.$schedule")"
            if [ "$m" -eq 1 ]; then awk "$mean" "$work/runs.$schedule" >"$work/m1.$schedule"; fi
            line=$(echo "$row" | awk -v model="$name" -v sched="$schedule" -v m="$m" \
                -v cut="$(cat "$work/cut.$schedule")" '{
                step_err = 100 * ($3 - $1) / $1; bubble_err = 100 * ($4 - $2);
                ok = (step_err <= 5 && step_err >= -5 && bubble_err <= 2 && bubble_err >= -2);
                printf "%-22s %-6s %3d %5d | %9.3f %6.0f%% %9.3f %+7.1f | %7.1f%% %7.1f%% %+7.1f | %s\n",
                       model, sched, m, cut, 1e3 * $1, 100 * ($6 - $5) / $1, 1e3 * $3, step_err,
                       100 * $2, 100 * $4, bubble_err, ok ? "meets" : "MISSES"
            }')
            echo "$line"
            case "$line" in *meets) met=$((met + 1)) ;; esac
            # Each turn's own error (its simulation against its run): how
            # far this machine moves a single turn, and how closely the
            # turns pin the mean error down (a 95% interval from their
            # spread, with Student's t for N - 1 degrees of freedom). An
            # interval wider than the bar means the run cannot tell whether
            # the point meets it.
            paste -d' ' "$work/runs.$schedule" "$work/sims.$schedule" | awk '
                BEGIN { split("12.71 4.30 3.18 2.78 2.57 2.45 2.36 2.31 2.26 2.23 2.20 2.18 2.16 2.14 2.13 2.12 2.11 2.10 2.09 2.09 2.08 2.07 2.07 2.06 2.06 2.06 2.05 2.05 2.05 2.04", t, " ") }
                {e[NR] = 100 * ($3 - $1) / $1; sum += e[NR]
                 if (NR == 1 || e[NR] < lo) lo = e[NR]; if (NR == 1 || e[NR] > hi) hi = e[NR]}
                END { mean = sum / NR
                    if (NR < 2) { printf "    turn by turn: one turn, %+.1f%%\n", mean; exit }
                    for (i = 1; i <= NR; i++) ss += (e[i] - mean) ^ 2
                    q = NR - 1 <= 30 ? t[NR - 1] : 1.96
                    printf "    turn by turn: errors %+.1f to %+.1f%%, mean %+.1f%% +- %.1f (95%%, %d turns)\n",
                           lo, hi, mean, q * sqrt(ss / (NR - 1) / NR), NR }'
            if [ "$replay" = 1 ]; then
                paste -d' ' "$work/runs.$schedule" "$work/replays.$schedule" | awk '
                    {meas += $1; bub += $2; sim += $3; sim_bub += $4} END {
                    printf "    replay from the runs'"'"' own op times: %.3f ms, err %+.1f%%; bubble %.1f%%, err %+.1f pt\n",
                           1e3 * sim / NR, 100 * (sim - meas) / meas, 100 * sim_bub / NR,
                           100 * (sim_bub - bub) / NR }'
            fi
            if [ "$bracket" = 1 ]; then
                paste -d' ' "$work/runs.$schedule" "$work/brackets.$schedule" | awk '
                    {b = 100 * ($3 - $1) / $1; a = 100 * ($5 - $1) / $1
                     sb += b; sa += a; d = 100 * ($5 - $3) / $3; if (d < 0) d = -d; gap += d
                     if (d > most) most = d} END {
                    printf "    bracket: the profile before gives err %+.1f%%, the one after %+.1f%%; the two simulations %.1f%% apart on average, %.1f%% at most\n",
                           sb / NR, sa / NR, gap / NR, most }'
            fi
            if [ "$ablate" = 1 ]; then
                paste -d' ' "$work/runs.$schedule" "$work/plain.$schedule" | awk '
                    {meas += $1; bub += $2; sim += $3; sim_bub += $4} END {
                    printf "    without the after-wait slowdown: %.3f ms, err %+.1f%%; bubble %.1f%%, err %+.1f pt\n",
                           1e3 * sim / NR, 100 * (sim - meas) / meas, 100 * sim_bub / NR,
                           100 * (sim_bub - bub) / NR }'
            fi
            if [ "$breakdown" = 1 ]; then python3 -c "
import sys
rows = [[float(x) for x in line.split()] for line in open(sys.argv[1])]
k = len(rows[0]) // 8
mean = [sum(r[i] for r in rows) / len(rows) for i in range(len(rows[0]))]
for s in range(k):
    parts = []
    for j, what in enumerate(('fwd', 'bwd', 'copy', 'wait')):
        meas, sim = mean[4 * s + j], mean[4 * (k + s) + j]
        parts.append('%s %7.3f %7.3f' % (what, 1e3 * meas, 1e3 * sim))
    print('    stage %d ms per step (measured, simulated): %s' % (s, ' | '.join(parts)))
" "$work/parts.$schedule"; fi
        done
    done
    points=$((2 * $(echo "$ms" | wc -w)))
    echo "$name: $met of $points points meet the bar (|step err| <= 5%, |bubble err| <= 2 points)"
    # At M = 1 GPipe and 1F1B run the same ops in the same order: any
    # difference between their measured steps is this machine's noise.
    if [ -f "$work/m1.gpipe" ]; then
        paste -d' ' "$work/m1.gpipe" "$work/m1.1f1b" | awk -v model="$name" '{
            printf "%s: noise check: GPipe and 1F1B are one schedule at M = 1; measured %.3f and %.3f ms, %.1f%% apart\n",
                   model, 1e3 * $1, 1e3 * $3, 200 * ($3 - $1) / ($3 + $1) }'
        rm -f "$work/m1.gpipe" "$work/m1.1f1b"
    fi
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
