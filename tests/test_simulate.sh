#!/bin/sh
# Tests of 'brigade profile', 'brigade simulate', 'sweep --simulate' and the
# planner's choices: a profile is JSON that parses and belongs to its model
# (another model's is refused, naming the file), a simulation prints the
# train summary with its bubble line, writes a trace, a timeline and
# metrics that parse, --microbatches auto and --schedule auto print their
# choice, train refuses what does not fit --device-mem, and bad sizes are
# usage errors.
#
# usage: test_simulate.sh PATH/TO/brigade
# Runs from any directory; examples/ is found through $BRIGADE_SOURCE_ROOT
# (set by meson) or else next to this script.

TEST_NAME=simulate
. "$(dirname "$0")/cli_harness.sh"

# --- usage -------------------------------------------------------------------

# --- profile -----------------------------------------------------------------

expect 0 "" -- profile --help
stdout_has "--microbatches" "brigade profile --help"
usage_error "no MODEL given" -- profile
usage_error "unknown option '--bogus'" -- profile "$MODEL" --bogus
usage_error "--repetitions: 0 is outside 1..101" -- profile "$MODEL" --repetitions 0
usage_error "would leave some micro-batches empty" -- profile "$MODEL" --batch 4 --microbatches 8
for bad in 1,,2 '' '1,'; do
    usage_error "--sizes: empty item in '$bad' (expected A,B,...)" \
        -- profile "$MODEL" --sizes "$bad"
done
usage_error "--sizes: expected an integer, got 'x'" -- profile "$MODEL" --sizes 1,x
usage_error "--sizes '1,2,3,4,5,6,7,8,1': at most 6 sizes" -- profile "$MODEL" \
    --sizes 1,2,3,4,5,6,7,8,1
# ceil(B / M) among them is dropped, and does not count: 16 here.
usage_error "--sizes: at most 6 sizes besides the micro-batch's own, 16" -- profile "$MODEL" \
    --microbatches 4 --sizes 1,2,3,4,5,6,7
usage_error "--sizes '0,4': 0 (no other sizes) must stand alone" -- profile "$MODEL" --sizes 0,4
# A repeat is refused, as sweep's lists refuse one (a typo, likely).
usage_error "--sizes '5,3,2,3': 3 is listed twice" -- profile "$MODEL" --sizes 5,3,2,3
# The sizes given, in order, less ceil(B / M); 0: none; by default 1 and
# B, less ceil(B / M).
for entry in "0:" "5,3,2:3,5" "1,8:1,8" "4,1:1,4" ":1,8"; do
    given=${entry%%:*} kept=${entry#*:}
    if expect 0 "" -- profile "$MODEL" --batch 8 --microbatches 4 ${given:+--sizes "$given"} \
        --split 4 --repetitions 1 -o "$T/sizes.json"; then
        file_check "--sizes '$given': other sizes [$kept]" "$T/sizes.json" "
assert p.get('other_sizes', []) == [$kept], p.get('other_sizes')
assert all(len(l.get('at_other_sizes', [])) == len(p.get('other_sizes', [])) for l in p['layers'])"
    fi
done
# (the default ran last)
check "the default's table: a column per size, the profile's marked" \
    grep -qE "^layer  fwd \+ dX \+ dW ms at +1 +2\* +8$" "$OUT"
check "boundaries handing tensors of one size are one entry" \
    grep -qE "per boundary \(us, by the first layer after it, as --split\): send/recv 1-2:[0-9.]+/[0-9.]+ 3-4:[0-9.]+/[0-9.]+ 5-6:" "$OUT"
# The micro-batch's own size among those given is said to be timed anyway
# (until 2026-12-05 it was dropped without a word, --sizes 2 here the
# same as --sizes 0).
expect 0 "note: --sizes: 2 is the micro-batch's own size (ceil(8 / 4)), which is timed anyway; no other size is (as --sizes 0)" \
    -- profile "$MODEL" --batch 8 --microbatches 4 --sizes 2 --split 4 --repetitions 1 \
    -o "$T/sizes-own.json"
file_check "--sizes of the micro-batch's own size: one size timed" "$T/sizes-own.json" "
assert 'other_sizes' not in p, p.get('other_sizes')"
# A size whose stage of the whole model would hold over half the memory
# (the CNN at 2^20 samples: hundreds of GiB) is left out, said so.
expect 0 "note: the layers are not timed at 1048576 samples: the stage of the whole model that times them would hold" \
    -- profile "$MODEL" --batch 8 --microbatches 4 --sizes 1,1048576 --split 4 --repetitions 1 \
    -o "$T/sizes.json"
file_check "the size left out is not in the profile" "$T/sizes.json" '
assert p["other_sizes"] == [1], p["other_sizes"]'
check "a size past the batch is said to serve a larger one" grep -qxF \
    "note: --sizes: 1048576 is larger than the batch of 8, so no micro-batch of it has that many samples; a size past the batch serves plans of a larger --batch" \
    "$ERR"
expect 0 "" -- profile "$MODEL" --batch 8 --microbatches 4 --sizes 1,8 --split 4 --repetitions 1
check "no such note for sizes within the batch" sh -c "! grep -q 'larger than the batch' '$ERR'"
expect 0 "" -- profile "$MODEL" --batch 1 --split 4 --repetitions 1
check "--batch 1: one size, priced in proportion" \
    grep -q "^other micro-batch sizes are priced in proportion to the samples (one size timed; --sizes names others to time)$" \
    "$OUT"
usage_error "cannot read '$T/missing.model': No such file or directory" -- \
    profile "$T/missing.model"

P=$T/cnn.profile.json
if expect 0 "" -- profile "$MODEL" --batch 64 --microbatches 4 --repetitions 3 -o "$P"; then
    stdout_has "conv2d" "profile table"
    stdout_has "total" "profile table"
    stdout_has "copy bandwidth" "profile table"
    stdout_has "(0 ms: layer 0's dX is never run, as nothing comes before it; layer 1 (relu)'s fwd runs inside layer 0's conv2d, dX inside layer 2's maxpool; layer 3 (flatten) only reshapes)" \
        "profile table says why some times are 0"
    # 36 ranges x 3 slot counts (1, 2, 4) x 3 passes, counted on stderr
    check "profile reports its progress through the layer ranges" \
        grep -q "^timing layer ranges as stages: 324/324 (100%), 0:00 left$" "$ERR"
    check "profile tables have a row per layer each (times, and totals by size)" \
        test "$(grep -cE '^ +[0-7] +[a-z_0-9]+ +[0-9.]+ ' "$OUT")" -eq 16
    # Beside each layer's measured total, the analytic model's: the
    # flatten's two ops at 0.1 us; the max-pool's 0.45 ns forward and 0.40
    # dX for each of 16 x 21632 window values and its two ops, 0.2944 ms
    # (its 4 FLOPs a window priced it at a thirtieth of its time until
    # 2026-12-06).
    check "profile: the analytic model's ms beside the measured" python3 -c '
import sys
lines = open(sys.argv[1]).read().splitlines()
head = lines[0].split()
assert head[-2:] == ["model", "ms"] and "total" in head, head
rows = {int(l.split()[0]): l.split() for l in lines[1:9]}
assert all(len(r) == 8 for r in rows.values()), rows
assert rows[3][1] == "flatten" and rows[3][-1] == "0.0002", rows[3]
assert rows[2][1] == "maxpool" and rows[2][-1] == "0.2944", rows[2]
assert any(l.startswith("model ms: ") for l in lines), lines' "$OUT"
    file_check "profile JSON parses, 8 layers at micro-batch 16" "$P" '
assert p["batch"] == 16, p["batch"]
assert p["copy_bytes_per_s"] > 0
assert len(p["layers"]) == 8
for l in p["layers"]:
    for key in ("forward_s", "backward_data_s", "backward_weights_s", "update_s"):
        assert l[key] >= 0, (key, l)
assert p["layers"][0]["forward_s"] > 0
assert p["layers"][4]["backward_weights_s"] > 0 and p["layers"][4]["update_s"] > 0
assert p["layers"][1]["backward_weights_s"] == 0
assert p["version"] == 2 and p["stash_slots"] == 2
assert p["device"] == "cpu" and p["optimizer"] == "adam" and p["optimizer_states"] == 2
assert p["handoff_s"] > 0 and p["wake_s"] > 0
assert p["layers"][0]["send_s"] == 0 and p["layers"][0]["recv_s"] == 0
assert p["layers"][4]["send_s"] > 0 and p["layers"][4]["recv_s"] > 0
# a message size is timed once: the inputs of the relu and of the pool are
# both 32x26x26, those of the flatten and of the dense layer 5,408 values
for a, b in ((1, 2), (3, 4)):
    for key in ("send_s", "recv_s"):
        assert p["layers"][a][key] == p["layers"][b][key], (key, a, b)
assert p["layers"][1]["send_s"] != p["layers"][4]["send_s"]
# every range of the 8 layers, with 1, 2 and 4 micro-batches in flight
assert len(p["stages"]) == 36 * 3, len(p["stages"])
ranges = {(s["first"], s["last"], s["slots"]) for s in p["stages"]}
assert (0, 4, 2) in ranges and (4, 8, 1) in ranges and (0, 8, 4) in ranges
s = [s for s in p["stages"] if (s["first"], s["last"], s["slots"]) == (4, 8, 1)][0]
assert s["forward_s"] > 0 and s["recv_s"] > 0 and s["send_s"] == 0 and s["grad_send_s"] > 0
# the check of the weight gradients: layers with weights only; a range
# without any (layers 2 and 3, a max-pool and a flatten) times next to
# nothing, a hundredth of the one with the dense layers at most
checks = [l["weight_check_s"] for l in p["layers"]]
assert all((c > 0) == (i in (0, 4, 6)) for i, c in enumerate(checks)), checks
empty = [e for e in p["stages"] if (e["first"], e["last"], e["slots"]) == (2, 4, 1)][0]
assert 100 * empty["weight_check_s"] < s["weight_check_s"], (empty, s)
# the layers again at 1, 4 and 64 samples (1, B and between, each within
# 4 times the next), forward, dX and dW: the convolution takes about 1/16
# of its time at 16 and 4 times it at 64, so less at 1 than at 16 and more
# at 64; the dense layer reads its 2.8 MB of weights at any size, so its
# 16 and 64 are too close to order on a busy machine (a CI run measured
# 2.58 ms at 16 and 2.40 at 64), and so are 1 and 16 (1.52 against 1.45
# beside two other busy processes): only 1 is checked to be less than 64
assert p["other_sizes"] == [1, 4, 64], p.get("other_sizes")
for l in p["layers"]:
    for t in l["at_other_sizes"]:
        assert sorted(t) == ["backward_data_s", "backward_weights_s", "forward_s"], l
for i in (0, 4):
    l = p["layers"][i]
    at16 = l["forward_s"] + l["backward_data_s"] + l["backward_weights_s"]
    at1, at4, at64 = (sum(t.values()) for t in l["at_other_sizes"])
    assert 0 < at1 < at64, (i, at1, at16, at64)
    assert i != 0 or at1 < at16 < at64, (i, at1, at16, at64)'
    # A version 1 profile (no version, no channel costs) still loads, and
    # so does a version 2 one from before the gradients' checks; a newer
    # version is refused, saying to profile again.
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
for entry in p['layers'] + p['stages']:
    del entry['weight_check_s']
for l in p['layers']:
    del l['at_other_sizes']
del p['other_sizes']
json.dump(p, open(sys.argv[4], 'w'))
for key in ('version', 'stash_slots', 'handoff_s', 'wake_s', 'stages'):
    del p[key]
for l in p['layers']:
    del l['send_s'], l['recv_s']
json.dump(p, open(sys.argv[2], 'w'))
p['version'] = 3
json.dump(p, open(sys.argv[3], 'w'))" "$P" "$T/v1.profile.json" "$T/v3.profile.json" \
        "$T/v2-unchecked.profile.json"
    expect 0 "note: $T/v1.profile.json holds no stage times (a version 1 profile, older than stage times)" \
        -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --profile "$T/v1.profile.json"
    stdout_has "bubble: simulated" "simulate with a version 1 profile"
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4 \
        --profile "$T/v2-unchecked.profile.json"
    stdout_has "bubble: simulated" "simulate with a version 2 profile without weight_check_s"
    expect 2 "$T/v3.profile.json" -- simulate "$MODEL" --profile "$T/v3.profile.json"
    check "a newer profile version: says to profile again" grep -qF "run brigade profile again" "$ERR"
    # One device: no co-runner, so no range is timed under load.
    file_check "a profile of one device has no times under load or after waits" "$P" '
assert all("loaded" not in s and "after_wait" not in s for s in p["stages"])'
    # So stages on two CPU devices are priced as if alone, and said so.
    # (A profile whose times under load were all left out reads so too: a
    # tester's said "made on one device" of a profile made on two.)
    expect 0 "note: $P times its stages running alone only (a profile made on one device has no times beside another), so the 2 CPU devices here" \
        -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --profile "$P"
fi

# same_simulated_step WHAT A B: simulates split 4 at M = 2 on cpu:2 from
# $T/A.profile.json and $T/B.profile.json; the two steps are one figure,
# and under a second (a slowdown priced in would make it far longer).
same_simulated_step() {
    for kind in "$2" "$3"; do
        expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 2 --split 4 \
            --profile "$T/$kind.profile.json" --metrics "$T/$kind.metrics.json"
    done
    check "$1" python3 -c "import json, sys
a, b = (json.load(open(f))['timeline']['step_s'] for f in sys.argv[1:])
assert a == b and a < 1, (a, b)" "$T/$2.metrics.json" "$T/$3.metrics.json"
}

# The header names the split simulated, as train's placement line does
# (until 2026-12-06 only "split chosen by the planner": a new user could
# not tell it from the profile's).
expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4
check "simulate names the planner's split, at the end of its first line" grep -qE \
    "^simulation of .*: 2 stages on cpu:0, cpu:1; 1f1b, 4 micro-batches; split 4$" \
    "$OUT"
expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --split 3
check "simulate names a given split" grep -qE "; 1f1b, 4 micro-batches; split 3$" "$OUT"

# Two CPU devices: every range is timed again beside a co-runner on the
# second core; a malformed time under load is refused, naming the entry.
P2=$T/cnn2.profile.json
if expect 0 "" -- profile "$MODEL" --batch 64 --microbatches 2 --devices cpu:2 \
    --repetitions 3 -o "$P2"; then
    # 72 entries of 36 ranges, less any a busy machine swamped (kept as not
    # measured): the table counts those the file holds.
    check "profile table of two devices: the timings under load the file holds" python3 -c '
import json, re, sys
p = json.load(open(sys.argv[1]))
loaded = [s for s in p["stages"] if "loaded" in s]
ranges = {(s["first"], s["last"]) for s in loaded}
want = "under load: %d timings of %d layer ranges" % (len(loaded), len(ranges))
assert want in open(sys.argv[2]).read(), want' "$P2" "$OUT"
    check "profile table of two devices: after waits" \
        grep -qE "^after a wait: [0-9]+ timings of [0-9]+ layer ranges" "$OUT"
    # A ratio printed below x1.00 (a busy machine's noise) is said to be
    # noise, under its table; one at or above it is not.
    check "profile table: ratios below x1.00 noted as noise, where printed" python3 -c '
import re, sys
text = open(sys.argv[1]).read()
load = re.search(r"^under load: .* x([0-9.]+) to x[0-9.]+ of alone$", text, re.M)
waits = re.search(r"^after a wait: .*\n(  fwd .*\n  bwd .*)$", text, re.M)
assert load and waits, text
for low, what in ((float(load.group(1)), "under load"),
                  (min(map(float, re.findall(r"x([0-9.]+) to", waits.group(1)))), "after a wait")):
    noted = "  (ratios %s below x1.00 are noise of a busy" % what in text
    assert noted == (low < 1), (what, low, noted)' "$OUT"
    file_check "a profile of two devices has its ranges under load (nine in ten at least)" "$P2" '
assert p["version"] == 2
assert len(p["stages"]) == 36 * 2, len(p["stages"])
# A tiny range swamped by noise under load (past 100 times its time alone)
# keeps 0s, not measured, which the file leaves out: most are measured.
for s in p["stages"]:
    l = s.get("loaded", {"forward_s": 0, "backward_s": 0, "update_s": 0, "copies_s": 0})
    assert all(l[k] >= 0 for k in ("forward_s", "backward_s", "update_s", "copies_s")), s
    assert (l["forward_s"] + l["backward_s"]) <= 100 * (s["forward_s"] + s["backward_s"]), s
measured = [s for s in p["stages"] if "loaded" in s and s["loaded"]["forward_s"] > 0]
assert len(measured) >= 0.9 * len(p["stages"]), len(measured)
# A tiny range whose ratio was swamped by noise (past 100) keeps 0, not
# measured (a busy machine gave one of 8 us ranges so): most are measured.
ratios = [s.get("after_wait", {}).get("%s_after_%s" % (op, theirs), 0) for s in p["stages"]
          for op in ("forward", "backward") for theirs in ("forward", "backward", "update")]
assert all(r >= 0 for r in ratios), ratios
assert sum(r > 0 for r in ratios) >= 0.9 * len(ratios), ratios'
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 2 --profile "$P2"
    stdout_has "bubble: simulated" "simulate with times under load"
    check "a profile of two devices: no note that its stages ran alone" \
        sh -c "! grep -q 'times its stages running alone' '$ERR'"
    # Ops after a wait: with every range's ops 4 times as slow after whatever
    # the other device ran, the simulated step is longer than with none (and
    # 40 times as slow, for plan's check below, far longer on any machine:
    # at 4 a slow one's profile left it within 10% of the estimate).
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
for s in p['stages']:
    s.pop('after_wait')
json.dump(p, open(sys.argv[2], 'w'))
for slowdown, path in ((4, sys.argv[3]), (40, sys.argv[4])):
    for s in p['stages']:
        s['after_wait'] = {'%s_after_%s' % (op, theirs): slowdown
                           for op in ('forward', 'backward')
                           for theirs in ('forward', 'backward', 'update')}
    json.dump(p, open(path, 'w'))" "$P2" "$T/nowait.profile.json" "$T/slowwait.profile.json" \
        "$T/slowerwait.profile.json"
    # The first shape of these figures loads as not measured: the same step
    # as without them.
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
for s in p['stages']:
    s['after_wait'] = {'wait_s': 0.001, 'forward': 2, 'backward': 2}
json.dump(p, open(sys.argv[2], 'w'))" "$P2" "$T/oldwait.profile.json"
    for kind in nowait slowwait oldwait; do
        expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 2 --split 4 \
            --profile "$T/$kind.profile.json" --metrics "$T/$kind.metrics.json"
    done
    check "ops after a wait slow the simulated step" python3 -c "import json, sys
plain, slow = (json.load(open(f))['timeline']['step_s'] for f in sys.argv[1:])
assert slow > 1.05 * plain, (slow, plain)" "$T/nowait.metrics.json" "$T/slowwait.metrics.json"
    check "after-wait figures of the first shape simulate as none" python3 -c "import json, sys
plain, old = (json.load(open(f))['timeline']['step_s'] for f in sys.argv[1:])
assert old == plain, (old, plain)" "$T/nowait.metrics.json" "$T/oldwait.metrics.json"
    # plan prints both figures; far apart, it says why.
    expect 0 "" -- plan "$MODEL" --devices cpu:2 --microbatches 2 --split 4 \
        --profile "$T/slowerwait.profile.json"
    stdout_has "(the simulation plays the schedule op by op: each wait, hand-off and copy, and each stage's NaN check of its weight gradients, which comes before the last gradient it sends, and the profile's slowdowns of ops after a wait" \
        "plan explains a simulated step far from its estimate"
    # A ratio past 100 in a file is read as not measured, as the profiler
    # keeps one (until 2026-12-06 the file was refused whole): 1000 on every
    # ratio of split 4's stages simulates as 0 on each.
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
for value, path in ((1000, sys.argv[2]), (0, sys.argv[3])):
    for s in p['stages']:
        s['after_wait'] = {'%s_after_%s' % (op, theirs): value
                           for op in ('forward', 'backward')
                           for theirs in ('forward', 'backward', 'update')}
    json.dump(p, open(path, 'w'))" "$P2" "$T/badwait.profile.json" "$T/zerowait.profile.json"
    same_simulated_step "ratios after a wait past 100: simulated as not measured" badwait zerowait
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
p['stages'][5]['loaded'] = {'forward_s': 1e-3, 'backward_s': -1, 'update_s': 0, 'copies_s': 0}
json.dump(p, open(sys.argv[2], 'w'))" "$P2" "$T/badload.profile.json"
    expect 2 "stage entry 5 'loaded'" -- simulate "$MODEL" --profile "$T/badload.profile.json"
    # Past the bound of a slowdown after a wait, a slowdown under load is
    # read as not measured, as the profiler keeps it now (a tester's 1e9
    # times simulated a 36-minute step): every stage of split 4 at 1000
    # times simulates as with no time under load at all.
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
for s in p['stages']:
    s['loaded'] = {'forward_s': 1000 * (s['forward_s'] + s['backward_s']), 'backward_s': 0,
                   'update_s': 0, 'copies_s': 0}
json.dump(p, open(sys.argv[2], 'w'))
for s in p['stages']:
    del s['loaded']
json.dump(p, open(sys.argv[3], 'w'))" "$P2" "$T/slowload.profile.json" "$T/noload.profile.json"
    same_simulated_step "a slowdown under load past 100 times: simulated as none" slowload noload
fi

# --split: only that split's stages are timed, at any model size; a plan
# for another split is told it is priced from the layers' sums.
usage_error "--split: stage 1 would start at layer 9; boundaries must increase and lie within 1..7" \
    -- profile "$MODEL" --split 9
usage_error "--split: stage 1 would start at layer 9; boundaries must increase and lie within 1..7" \
    -- simulate "$MODEL" --devices cpu:2 --split 9
usage_error "--optimizer: unknown optimizer 'foo' (expected sgd or adam)" -- \
    simulate "$MODEL" --optimizer foo
usage_error "--optimizer: unknown optimizer 'foo' (expected sgd or adam)" -- \
    profile "$MODEL" --optimizer foo
usage_error "--split: stage 2 would start at layer 2; boundaries must increase and lie within 1..7" \
    -- profile "$MODEL" --split 4,2
usage_error "--split: expected layer numbers like 3,5, got 'x'" -- profile "$MODEL" --split x
# A reader of the table gone: the profile is written all the same, and
# then SIGPIPE ends the command (the 17 KB table of 93 layers, longer than
# stdio's buffer, once ended it before the profile was saved).
deep_mlp "$T/deep45.model" 45
into_closed_pipe "$T/status" "$BRIGADE" profile "$T/deep45.model" --microbatches 2 \
    --devices cpu:2 --repetitions 1 --split 4 -o "$T/piped.profile.json"
check "profile into a closed pipe: ended by SIGPIPE (exit status $(cat "$T/status"))" \
    test "$(cat "$T/status")" -eq 141
check "profile into a closed pipe: the profile written" test -s "$T/piped.profile.json"
PS=$T/split.profile.json
if expect 0 "" -- profile "$MODEL" --batch 64 --microbatches 2 --devices cpu:2 \
    --repetitions 3 --split 4 -o "$PS"; then
    # 2 ranges x 2 slot counts (1, 2) x 3 passes
    check "a split profile times its stages only" \
        grep -q "^timing layer ranges as stages: 12/12 (100%), 0:00 left$" "$ERR"
    stdout_has "under load: 4 timings of 2 layer ranges" "profile table of a split"
    file_check "a split profile holds its two stages at 1 and 2 slots, under load" "$PS" '
ranges = [(s["first"], s["last"], s["slots"]) for s in p["stages"]]
assert ranges == [(0, 4, 1), (0, 4, 2), (4, 8, 1), (4, 8, 2)], ranges
assert all(s["loaded"]["forward_s"] > 0 and s["forward_s"] > 0 for s in p["stages"])'
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 2 --split 6 --profile "$PS"
    check "a split profile on another --split: the note says so" grep -qF \
        "note: $PS times only the stages of split 4 (brigade profile --split); other splits are priced from its layers' sums, without the slowdowns it measured beside the other stages, so they may look faster than they run: give --split 4 too" \
        "$ERR"
    # On another number of stages --split 4 cannot help: the note says the
    # profile does not time this placement's stages (until 2026-12-04 it
    # advised --split 4, which four stages refuse).
    expect 0 "" -- simulate "$MODEL" --devices cpu:4 --microbatches 2 --profile "$PS"
    check "a split profile on four stages: not told to give --split 4" grep -qF \
        "note: $PS times only the 2 stages of split 4 (brigade profile --split), not this placement's 4; its stages are priced from the profile's layers' sums" \
        "$ERR"
    # plan says where its figures come from, as simulate does (until
    # 2026-12-04 neither its text nor its JSON did).
    expect 0 "" -- plan "$MODEL" --devices cpu:2 --microbatches 2 --profile "$PS" --json
    json_check "plan --json names its profile" "assert p['profile'] == '$PS', p.get('profile')"
    expect 0 "" -- plan "$MODEL" --devices cpu:2 --microbatches 2 --json
    json_check "plan --json without a profile: null" "assert p['profile'] is None, p"
    expect 0 "" -- plan "$MODEL" --devices cpu:2 --microbatches 2 --profile "$PS"
    stdout_has "; costs from $PS" "plan names its profile"
    # Where the planner chooses, the note comes when it chose another split.
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 2 --profile "$PS" \
        --metrics "$T/chosen.metrics.json"
    check "a split profile, the planner choosing: a note only if it chose another split" \
        python3 -c "import json, sys
first = json.load(open(sys.argv[1]))['stages'][1]['layers'][0]
noted = 'times only the stages of split 4' in open(sys.argv[2]).read()
assert noted == (first != 4), (first, noted)" "$T/chosen.metrics.json" "$ERR"
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 2 --split 4 --profile "$PS" \
        --metrics "$T/split.metrics.json"
    if grep -qF "times only the stages" "$ERR"; then
        fail "a split profile with its --split: a note all the same"
    else
        pass
    fi
    # The stages' own figures count: doubling them lengthens the step.
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
for s in p['stages']:
    for key in ('forward_s', 'backward_s'):
        s[key] *= 2
        s['loaded'][key] *= 2
json.dump(p, open(sys.argv[2], 'w'))" "$PS" "$T/slow-split.profile.json"
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 2 --split 4 \
        --profile "$T/slow-split.profile.json" --metrics "$T/slow-split.metrics.json"
    check "a split profile's stage times price its split" python3 -c "import json, sys
plain, slow = (json.load(open(f))['timeline']['step_s'] for f in sys.argv[1:])
assert slow > 1.5 * plain, (slow, plain)" "$T/split.metrics.json" "$T/slow-split.metrics.json"
fi
# Past 64 layers a profile times no ranges, but a split's stages still.
deep_mlp "$T/deep.model" 40
if expect 0 "" -- profile "$T/deep.model" --repetitions 1 --split 30,60 -o "$T/deep.profile.json"; then
    file_check "a split profile of 83 layers holds its three stages" "$T/deep.profile.json" '
assert len(p["layers"]) == 83, len(p["layers"])
ranges = [(s["first"], s["last"]) for s in p["stages"]]
assert ranges == [(0, 30), (30, 60), (60, 83)], ranges'
fi

# A simulation whose timeline could not be held is refused before it runs
# (1,000 steps of 8 stages x 65,536 micro-batches x 3 ops, F and B each
# recording up to 6 events (a wait and a copy in, a wait, a copy out and a
# link), W one: past the half an int's count a timeline
# holds, on any machine), not after minutes of growing memory; as a
# request, with exit 2, before the header.
usage_error "timeline: recording up to 6160400000 events (321.3 GiB) is past the 1073741823 a timeline holds" \
    -- simulate "$MODEL" --devices cpu:8 --split 1,2,3,4,5,6,7 --schedule zb-h1 \
    --batch 1048576 --microbatches 65536 --steps 1000
# So is a simulated sweep's point (until 2026-12-04 counted at one event an
# op, and 100,000 steps of 64 micro-batches on cpu:8 grew to 12.6 GB in 34 s
# before the refusal, exit 1); and it takes at most 1,000 steps, as
# simulate does.
expect 2 "timeline: recording up to 6160400000 events (321.3 GiB) is past the 1073741823 a timeline holds" \
    -- sweep "$MODEL" --simulate --devices cpu:8 --split 1,2,3,4,5,6,7 --schedule zb-h1 \
    --batch 1048576 --microbatches 65536 --steps 1000
# A point's timeline holds each step, measured or simulated: at most 1,000
# (until 2026-12-05 a measured sweep took 100,000: its memory grew by about
# 54 KB a step on two stages at M = 64, measured up to 6,000 steps).
for simulate in --simulate ""; do
    usage_error "--steps: 1001 is outside 1..1000" \
        -- sweep "$MODEL" $simulate --microbatches 1 --steps 1001
done

# A profile of another model (other shapes) is refused, naming the file.
sed 's/units=128/units=64/' "$MODEL" >"$T/small.model"
expect 0 "" -- profile "$T/small.model" --repetitions 1 -o "$T/small.profile.json"
expect 2 "$T/small.profile.json" -- simulate "$MODEL" --profile "$T/small.profile.json"
check "another model's profile: says so" grep -qF "another model" "$ERR"
check "another model's profile: says which layer differs" \
    grep -qF "; its layer 4 is 'dense units=64' where this model has 'dense units=128')" "$ERR"
file_check "a profile keeps its model's layers in words" "$T/small.profile.json" "
assert p['model_layers'].startswith('input channels=1 height=28 width=28; conv2d filters=32'), p['model_layers']"
expect 2 "$T/small.profile.json" -- plan "$MODEL" --profile "$T/small.profile.json"
expect 2 "$T/none.json" -- simulate "$MODEL" --profile "$T/none.json"
printf '{"model": 3' >"$T/broken.json"
expect 2 "$T/broken.json" -- simulate "$MODEL" --profile "$T/broken.json"
# A directory opens but does not read: the message says why.
mkdir "$T/profile.d"
expect 2 "cannot read '$T/profile.d': Is a directory" -- simulate "$MODEL" --profile "$T/profile.d"

# --- malformed profiles: each refusal names the file, what and where ---------

# bad_profile NAME 'MESSAGE' PYTHON-CODE: writes $T/NAME.json, the profile $P
# with the code applied to it (bound to `p`), and expects simulate to refuse
# it with exit status 2 and "$T/NAME.json: MESSAGE" on stderr.
bad_profile() {
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
$3
json.dump(p, open(sys.argv[2], 'w'))" "$P" "$T/$1.json"
    expect 2 "$T/$1.json: $2" -- simulate "$MODEL" --devices cpu:2 --microbatches 4 \
        --profile "$T/$1.json"
}

if [ -s "$P" ]; then
    bad_profile version0 "'version' must be a whole number >= 1" 'p["version"] = 0'
    # 1e999 parses as infinity, which JSON cannot write otherwise.
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
p['handoff_s'] = 12345.5
open(sys.argv[2], 'w').write(json.dumps(p).replace('12345.5', '1e999'))" "$P" "$T/infinite.json"
    expect 2 "$T/infinite.json: profile: 'handoff_s' is beyond a double's range (as 1e999 is); it must be a finite number >= 0" \
        -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --profile "$T/infinite.json"
    # Two profiles end to end, or garbage after one, are no profile.
    cat "$P" "$P" >"$T/twice.json"
    expect 2 "$T/twice.json: not a JSON profile (byte " -- simulate "$MODEL" --devices cpu:2 \
        --microbatches 4 --profile "$T/twice.json"
    { cat "$P"; echo garbage; } >"$T/garbage.json"
    expect 2 "or more after the profile's object" -- simulate "$MODEL" --devices cpu:2 \
        --microbatches 4 --profile "$T/garbage.json"
    # Nested past cJSON's limit (1,000 levels) is said so, not taken for a
    # syntax error; 1,000 levels are read (and then are no profile, an
    # array).
    python3 -c 'print("[" * 1001 + "]" * 1001)' >"$T/deep.json"
    expect 2 "$T/deep.json: not a JSON profile (byte 1000: arrays and objects nested more than 1000 levels deep; run brigade profile)" \
        -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --profile "$T/deep.json"
    python3 -c 'print("[" * 1000 + "x" + "]" * 1000)' >"$T/deep.json"
    expect 2 "$T/deep.json: not a JSON profile (byte 1000: invalid JSON, or more after" \
        -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --profile "$T/deep.json"
    python3 -c 'print("[" * 1000 + "]" * 1000)' >"$T/deep.json"
    expect 2 "$T/deep.json: not a JSON profile (run brigade profile)" \
        -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --profile "$T/deep.json"
    { cat "$P"; printf '\n  \n'; } >"$T/spaces.json"
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --profile "$T/spaces.json"
    # A key twice in one object (cJSON would read the first): refused.
    sed 's/^{/{"batch": 1, /' "$P" >"$T/twice_key.json"
    expect 2 "$T/twice_key.json: key 'batch' appears twice in one object" -- simulate "$MODEL" \
        --devices cpu:2 --microbatches 4 --profile "$T/twice_key.json"
    # ... also deep inside, among thousands of keys (sorted, not compared
    # pair by pair).
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
p.update({'extra%d' % i: i for i in range(5000)})
p['stages'][-1]['MARK'] = 1
open(sys.argv[2], 'w').write(json.dumps(p).replace('\"MARK\": 1', '\"forward_s\": 0.001'))" \
        "$P" "$T/twice_deep.json"
    expect 2 "$T/twice_deep.json: key 'forward_s' appears twice in one object" -- simulate \
        "$MODEL" --devices cpu:2 --microbatches 4 --profile "$T/twice_deep.json"
    bad_profile version_half "'version' must be a whole number >= 1" 'p["version"] = 1.5'
    # A version 2 file that lost its 'version' is not read as version 1,
    # its stages ignored (until 2026-12-04 it was, with a note).
    bad_profile version_lost "has version 2's 'stages' or 'stash_slots' but no 'version'" \
        'del p["version"]'
    bad_profile version_one "has version 2's 'stages' or 'stash_slots' but \"version\": 1" \
        'p["version"] = 1'
    bad_profile version_text "'version' must be a whole number >= 1" 'p["version"] = "2"'
    bad_profile layers7 "needs a 'layers' list of 8 entries" 'del p["layers"][7]'
    not_profile="not a brigade profile (a profile names its model by a fingerprint and has a 'layers' list"
    bad_profile layers_object "needs a 'layers' list of 8 entries" 'p["layers"] = {}'
    # Another JSON file (a run's --metrics names its model by path, and has
    # no 'layers') is named so, not taken for another model's profile.
    bad_profile metrics_like "$not_profile" \
        'p.clear(); p.update(model="examples/fashion_cnn.model", steps=3)'
    # A profile with its 'model' amiss is told so (until 2026-12-04 called
    # no profile at all, as were the 'layers' above).
    model="'model' must be the profiled model's fingerprint, 16 lowercase hex digits"
    bad_profile model_path "$model" 'p["model"] = "examples/fashion_cnn.model"'
    bad_profile no_model "$model" 'del p["model"]'
    bad_profile model_upper "$model" 'p["model"] = p["model"].upper()'
    batch="profile: 'batch' must be a whole number from 1 to 1e+09"
    bad_profile batch0 "$batch" 'p["batch"] = 0'
    bad_profile batch_negative "$batch" 'p["batch"] = -16'
    bad_profile batch_half "$batch" 'p["batch"] = 1.5'
    bad_profile batch_text "$batch" 'p["batch"] = "16"'
    bad_profile copy0 "profile: 'copy_bytes_per_s' is 0; a copy bandwidth must be from 1e+06 to 1e+13" \
        'p["copy_bytes_per_s"] = 0'
    bad_profile copy_tiny "profile: 'copy_bytes_per_s' is 1e-300" 'p["copy_bytes_per_s"] = 1e-300'
    # A negative bandwidth gets the same range (until 2026-12-04 it was told
    # "must be a number >= 0", which 0 is not either).
    bad_profile copy_negative "profile: 'copy_bytes_per_s' is -1; a copy bandwidth must be from 1e+06 to 1e+13" \
        'p["copy_bytes_per_s"] = -1'
    bad_profile copy_text "profile: 'copy_bytes_per_s' must be a number of bytes/s" \
        'p["copy_bytes_per_s"] = "fast"'
    bad_profile copy_huge "profile: 'copy_bytes_per_s' is 1e+308" 'p["copy_bytes_per_s"] = 1e308'
    bad_profile slots0 "profile: 'stash_slots' must be a whole number from 1 to 1e+06" \
        'p["stash_slots"] = 0'
    bad_profile device_cuda "'device' must be \"cpu\" (brigade profiles CPU cores only)" \
        'p["device"] = "cuda"'
    bad_profile optimizer_name "'optimizer' must be \"adam\" or \"sgd\"" 'p["optimizer"] = "lamb"'
    bad_profile optimizer_states "profile: 'optimizer_states' must be a whole number from 0 to 2" \
        'p["optimizer_states"] = 3'
    bad_profile adam_without_state "'optimizer_states' 0 does not fit adam" \
        'p["optimizer_states"] = 0'
    bad_profile stage_twice "stage entry 4 repeats stage entry 1" \
        'p["stages"][4] = dict(p["stages"][1])'
    bad_profile stages_object "'stages' must be a list" 'p["stages"] = {}'
    # The bounds of a layer range: whole 0 <= first < last <= 8, slots >= 1.
    bounds="stage entry 3: needs whole 0 <= first < last <= 8 and slots >= 1"
    bad_profile last9 "$bounds" 'p["stages"][3]["last"] = 9'
    bad_profile first_is_last "$bounds" 'p["stages"][3]["first"] = p["stages"][3]["last"]'
    bad_profile first_after_last "$bounds" 'p["stages"][3].update(first=5, last=2)'
    bad_profile first_half "$bounds" 'p["stages"][3]["first"] = 0.5'
    bad_profile stage_slots0 "$bounds" 'p["stages"][3]["slots"] = 0'
    # A negative first is refused as a negative number, before the bounds;
    # a slots that is no number is told its own least.
    bad_profile first_negative "stage entry 3: 'first' must be a number >= 0" \
        'p["stages"][3]["first"] = -1'
    bad_profile slots_text "stage entry 3: 'slots' must be a number >= 1" \
        'p["stages"][3]["slots"] = "2"'
    bad_profile loaded_number "stage entry 2 'loaded' must be an object" \
        'p["stages"][2]["loaded"] = 3'
    bad_profile after_wait_number "stage entry 2 'after_wait' must be an object" \
        'p["stages"][2]["after_wait"] = 3'
    bad_profile after_wait_missing "stage entry 2 'after_wait': 'forward_after_update' must be a number >= 0" \
        'p["stages"][2]["after_wait"] = {"forward_after_forward": 1, "backward_after_forward": 1, "forward_after_backward": 1, "backward_after_backward": 1}'
    sizes="profile: 'other_sizes' must be whole micro-batch sizes from 1, ascending, none the profile's 'batch' (16)"
    bad_profile sizes_batch "$sizes; entry 1 (from 0) is not" 'p["other_sizes"] = [1, 16]'
    bad_profile sizes_order "$sizes; entry 1 (from 0) is not" 'p["other_sizes"] = [64, 1]'
    bad_profile sizes_zero "$sizes; entry 0 (from 0) is not" 'p["other_sizes"] = [0, 64]'
    bad_profile sizes_half "$sizes; entry 0 (from 0) is not" 'p["other_sizes"] = [1.5, 64]'
    bad_profile sizes_many "profile: 'other_sizes' must be a list of up to 6 micro-batch sizes" \
        'p["other_sizes"] = [1, 2, 3, 4, 5, 6, 7]'
    bad_profile sizes_number "profile: 'other_sizes' must be a list of up to 6 micro-batch sizes" \
        'p["other_sizes"] = 1'
    bad_profile sizes_missing "layer 3 needs 'at_other_sizes', a list of 3 objects: its times at each of 'other_sizes'" \
        'del p["layers"][3]["at_other_sizes"]'
    bad_profile sizes_short "layer 3 needs 'at_other_sizes', a list of 3 objects" \
        'del p["layers"][3]["at_other_sizes"][1]'
    bad_profile sizes_unasked "layer 0 has 'at_other_sizes' but the profile times no other sizes ('other_sizes' absent or empty)" \
        'del p["other_sizes"]'
    bad_profile sizes_empty "layer 0 has 'at_other_sizes' but the profile times no other sizes ('other_sizes' absent or empty)" \
        'p["other_sizes"] = []'
    bad_profile layers_words "'model_layers' must be the model's layers in words (a string)" \
        'p["model_layers"] = 5'
    # brigade profile writes the optimizer and its buffers together.
    bad_profile states_alone "'optimizer_states' without 'optimizer' (brigade profile writes both, older profiles neither)" \
        'del p["optimizer"]'
    bad_profile sizes_not_object "layer 2 at 64 samples: not an object of times" \
        'p["layers"][2]["at_other_sizes"][2] = [1, 2, 3]'
    bad_profile sizes_negative "layer 4 at 1 sample: 'backward_weights_s' must be a number >= 0" \
        'p["layers"][4]["at_other_sizes"][0]["backward_weights_s"] = -1'
    bad_profile forward_negative "layer 4: 'forward_s' must be a number >= 0" \
        'p["layers"][4]["forward_s"] = -0.001'
    bad_profile forward_text "layer 4: 'forward_s' must be a number >= 0" \
        'p["layers"][4]["forward_s"] = "fast"'
    # A time over a day is a damaged file, not a measurement.
    bad_profile forward_huge "layer 2: 'forward_s' is 1e+300 s; a time must be from 0 to 86400 s" \
        'p["layers"][2]["forward_s"] = 1e300'
    bad_profile stage_send_huge "stage entry 1: 'send_s' is 100000 s; a time must be from 0 to 86400 s" \
        'p["stages"][1]["send_s"] = 1e5'
    # Update times are for the profile's optimizer; a profile is of CPU cores.
    expect 2 "$P: its update times are for adam with 2 state buffers; this run uses sgd with 0" \
        -- simulate "$MODEL" --devices cpu:2 --optimizer sgd --profile "$P"
    expect 2 "$P: its update times are for adam with 2 state buffers; this run uses sgd with 0" \
        -- train "$MODEL" --data synthetic --steps 1 --devices cpu:2 --optimizer sgd --profile "$P"
    # train uses a profile only where the planner chooses.
    usage_error "--profile prices the splits the planner chooses among; --split fixes the split, so train would not use it" \
        -- train "$MODEL" --data synthetic --steps 1 --devices cpu:2 --split 4 --profile "$P"
    usage_error "--profile prices the splits the planner chooses among; this run has one stage, so train would not use it" \
        -- train "$MODEL" --data synthetic --steps 1 --profile "$P"
    # Refused before the file is read: a profile for another optimizer is
    # not reported, nor any note on its contents.
    usage_error "--profile prices the splits the planner chooses among; this run has one stage" \
        -- train "$MODEL" --data synthetic --steps 1 --optimizer sgd --profile "$P"
    check "an unused profile is not read" sh -c "! grep -q 'update times' '$ERR'"
    expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --devices cpu:2 --split 4 \
        --microbatches auto --profile "$P"
    # A measured sweep prices each point's plan with it (sim ms), split
    # given or not; a simulated one predicts with it.
    expect 0 "" -- sweep "$MODEL" --devices cpu:2 --split 4 --microbatches 2 --steps 1 \
        --warmup 0 --profile "$P"
    stdout_has "(costs from $P; sim ms: each point's plan simulated; err: (sim - measured) / measured, negative where the simulation is faster)" \
        "a measured sweep on --split 4 with --profile"
    expect 0 "" -- sweep "$MODEL" --simulate --devices cpu:2 --split 4 --microbatches 2 \
        --profile "$P"
    expect 2 "--profile $P holds CPU core times, but --devices cuda:0x2 has cuda:0/0" \
        -- plan "$MODEL" --devices cuda:0x2 --profile "$P"
    # Its times are priced between the sizes it timed (1, 4, 16 and 64); a
    # size outside them is extrapolated, and plan, simulate and sweep say
    # so, with the command that times it; within them, nothing is said.
    for m in 1 4 64; do
        expect 0 "" -- plan "$MODEL" --devices cpu:2 --split 4 --microbatches $m --profile "$P"
        check "M=$m of 64 samples: within the sizes timed, no note" \
            sh -c "! grep -q 'extrapolated' '$ERR'"
    done
    expect 0 "note: M=1 makes micro-batches of about 128 samples, above the sizes --profile timed (1, 4, 16, 64): its times are extrapolated there; 'brigade profile' with --batch 128 --microbatches 1, and this run's MODEL, --devices and --split, times every size of a step of 128" \
        -- simulate "$MODEL" --devices cpu:2 --split 4 --microbatches 1 --batch 128 --profile "$P"
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
p['batch'] = 64
del p['other_sizes']
for l in p['layers']:
    del l['at_other_sizes']
json.dump(p, open(sys.argv[2], 'w'))" "$P" "$T/b64.profile.json"
    expect 0 "note: M=4 makes micro-batches of about 16 samples, below the sizes --profile timed (64)" \
        -- sweep "$MODEL" --simulate --devices cpu:2 --split 4 --microbatches 4 \
        --profile "$T/b64.profile.json"
    expect 0 "" -- plan "$MODEL" --devices cpu:2 --split 4 --microbatches auto \
        --profile "$T/b64.profile.json" --batch 4
    check "auto: the note gives the chosen M's micro-batch size" \
        grep -qE "note: M=(1 makes micro-batches of about 4 samples|2 makes micro-batches of about 2 samples|4 makes micro-batches of about 1 sample), below" "$ERR"
    # A sweep says it once, naming every M outside (not M=1: 64 samples).
    expect 0 "note: M=2,8 make micro-batches outside the sizes --profile timed (64): their times are extrapolated there; 'brigade profile' with --batch 64, and this run's MODEL, --devices and --split, times every size of a step of 64" \
        -- sweep "$MODEL" --simulate --devices cpu:2 --split 4 --microbatches 1,2,8 \
        --schedule gpipe,1f1b --profile "$T/b64.profile.json"
    check "one note for the sweep" test "$(grep -c '^note: M=' "$ERR")" -eq 1
    # A profile of one size at M=3 (22 samples; micro-batches of 21 and
    # 22): its own M is no size outside it.
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
p['batch'] = 22
json.dump(p, open(sys.argv[2], 'w'))" "$T/b64.profile.json" "$T/b22.profile.json"
    expect 0 "" -- plan "$MODEL" --devices cpu:2 --split 4 --microbatches 3 \
        --profile "$T/b22.profile.json"
    check "M=3 of a profile at M=3: no note" sh -c "! grep -q '^note: M=' '$ERR'"
    # auto searches only the counts the profile's sizes cover, where any is:
    # of one size, 16, M=4 alone (the others make micro-batches of 1 to 8
    # or of 32 and 64). With none covered (22: M=3 is no candidate), all,
    # with the note.
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
p['batch'] = 16
json.dump(p, open(sys.argv[2], 'w'))" "$T/b64.profile.json" "$T/b16.profile.json"
    expect 0 "brigade plan: chose --microbatches 4:" -- plan "$MODEL" --devices cpu:2 --split 4 \
        --microbatches auto --profile "$T/b16.profile.json"
    check "auto within the sizes: no note" sh -c "! grep -q '^note: M=' '$ERR'"
    # ... and it names the counts it tried (a tester's sweep found a count
    # faster than auto's choice that auto had never tried, unsaid).
    stderr_has "note: --microbatches auto tried M = 4 only, of its 7 counts: those whose micro-batches --profile timed ('brigade profile --sizes' times more)" \
        "auto names the counts a profile left it"
    expect 0 "the sizes --profile timed (22)" -- plan "$MODEL" --devices cpu:2 --split 4 \
        --microbatches auto --profile "$T/b22.profile.json"
    # Older profiles did not say their optimizer: accepted for any.
    python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
del p['optimizer'], p['optimizer_states']
json.dump(p, open(sys.argv[2], 'w'))" "$P" "$T/unsaid.json"
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --optimizer sgd --profile "$T/unsaid.json"
    # 64 MiB is the limit: the profile padded with spaces to exactly 64 MiB
    # loads, one byte more is refused (the file is deleted at once).
    python3 -c "import sys
text = open(sys.argv[1], 'rb').read()
open(sys.argv[2], 'wb').write(text + b' ' * ((64 << 20) - len(text)))" "$P" "$T/big.json"
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --profile "$T/big.json"
    stdout_has "costs from $T/big.json" "a profile of exactly 64 MiB"
    printf ' ' >>"$T/big.json"
    expect 2 "$T/big.json: larger than 64 MiB; not a profile" -- \
        simulate "$MODEL" --profile "$T/big.json"
    rm -f "$T/big.json"
fi

# --- simulate ----------------------------------------------------------------

expect 0 "" -- simulate --help
stdout_has "--profile" "brigade simulate --help"
expect 2 "no MODEL" -- simulate
expect 2 "unknown option '--bogus'" -- simulate "$MODEL" --bogus
expect 2 "--steps" -- simulate "$MODEL" --steps 0
expect 2 "multiple of the device count" -- simulate "$MODEL" --devices cpu:4 \
    --schedule interleaved --chunks 2 --microbatches 6

expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4
stdout_has "3 steps, as simulated" "simulate"
stdout_has "bubble: simulated" "simulate"
stdout_has "vs theory 20.0% (1f1b, K=2, M=4)" "simulate"
stdout_has "(simulated)" "simulate"
stdout_has "simulated: " "simulate"
check "simulate prints a row for each of 2 stages" \
    test "$(grep -cE '^ +[01] +cpu:[01] ' "$OUT")" -eq 2

# One device busy all step (two chunks on one CPU device): no bubble, and
# not -0.0% (a difference of sums rounding below 0).
expect 0 "" -- simulate "$ROOT/examples/conv_balanced.model" --devices cpu:1 \
    --schedule interleaved --chunks 2 --microbatches 4 --metrics "$T/one.json"
stdout_has "bubble: simulated 0.0% vs theory 0.0%" "simulate on one busy device"
file_check "simulate on one busy device: idle 0, not below" "$T/one.json" '
t = p["timeline"]
assert t["bubble_measured"] >= 0 and t["devices"][0]["idle_s"] >= 0, t'
file_check "simulate --metrics: the device's two stages together, as plan has them" "$T/one.json" '
d = p["devices"]
assert p["memory_check"] == "per_stage" and len(d) == 1 and d[0]["stages"] == [0, 1], p
assert d[0]["peak_bytes"] == sum(s["peak_bytes"] for s in p["stages"]), p'
# On one device a measured bubble is the host's work: the sweep says so, as
# train does; a simulated one has no host work, and no note.
expect 0 "" -- sweep "$ROOT/examples/fashion_mlp.model" --microbatches 1 --steps 1 --warmup 0 \
    --batch 16 --data synthetic
stdout_has "(one device: its bubble % is the host's work between ops and steps" \
    "sweep on one device: what its bubble is"
expect 0 "" -- sweep "$ROOT/examples/conv_balanced.model" --simulate --microbatches 1,2
check "a simulated sweep on one device: no note on host work" sh -c "! grep -qF '(one device:' '$OUT'"
# A sweep's interleaved points carry the same devices; its 1f1b points,
# one stage a device, none.
expect 0 "" -- sweep "$ROOT/examples/conv_balanced.model" --simulate --devices cpu:2 \
    --schedule interleaved,1f1b --chunks 2 --microbatches 4 --metrics "$T/sweep-v.json"
file_check "sweep --metrics: each interleaved point's devices and their stages together" \
    "$T/sweep-v.json" '
inter, plain = p["points"]
d = inter["devices"]
# The planner simulated each of its 120 splits, checked per device.
assert inter["memory_check"] == "per_device" and [x["stages"] for x in d] == [[0, 2], [1, 3]], inter
for x in d:
    assert x["peak_bytes"] == sum(inter["stages"][s]["peak_bytes"] for s in x["stages"]), x
assert "devices" not in plain and "memory_check" not in plain, plain'

# Two GPUs of a machine described by a fixture: every tensor crossing the
# link shows in the trace on a track of the stage it goes into (3 steps, 4
# activations and 4 gradients each), and the part of a wait it fills counts
# as exposed transfer. CPU devices copy themselves: no link track.
GPUS=$ROOT/tests/fixtures/two-socket-8-gpu.xml
expect 0 "" -- simulate "$MODEL" --topology "$GPUS" --devices cuda:0,cuda:4 \
    --microbatches 4 --trace "$T/gpus.trace.json" --metrics "$T/gpus.json"
file_check "simulate on GPUs: a link track into each stage, one event per tensor" \
    "$T/gpus.trace.json" '
events = p["traceEvents"]
names = sorted(e["args"]["name"] for e in events if e["name"] == "thread_name")
assert "stage 1 link from stage 0" in names and "stage 0 link from stage 1" in names, names
links = [e for e in events if e.get("cat") == "link"]
assert len(links) == 3 * 8, len(links)
assert all(e["dur"] > 0 for e in links)
assert sorted(set(e["name"] for e in links if e["args"]["stage"] == 1)) == \
    ["F%d from stage 0" % i for i in range(4)]'
file_check "simulate on GPUs: waits on the link are exposed transfer" "$T/gpus.json" '
t = p["timeline"]
waits = [d["link_wait_s"] for d in t["devices"]]
assert all(w > 0 for w in waits), waits
exposed = sum(d["copy_s"] + d["link_wait_s"] for d in t["devices"]) / len(waits) / t["step_s"]
assert abs(t["exposed_transfer_frac"] - exposed) < 1e-9 and exposed > 0, (t, exposed)'
# Two GPU stages of a linear model at M = 1: the optimizer step, busy on
# both at once, takes the bubble below theory (26.0% against 50.0%), and
# simulate and sweep say why (a model author's walk, 2026-12-06); at M = 4,
# above theory, not.
printf '%s\n' 'input channels=784 height=1 width=1' 'dense units=10' softmax_cross_entropy \
    >"$T/linear.model"
expect 0 "" -- simulate "$T/linear.model" --topology "$GPUS" --devices cuda:0,cuda:1 \
    --microbatches 1
stdout_has "bubble: simulated 26.0% vs theory 50.0%" "simulate: a bubble below theory"
stdout_has "(below theory: the optimizer step, 59.0% of a device's step on average, is busy time, which the theory, of F and B alone, leaves out; without it the bubble is 63.2%)" \
    "simulate: the bubble below theory is explained"
expect 0 "" -- sweep "$T/linear.model" --simulate --topology "$GPUS" --devices cuda:0,cuda:1 \
    --microbatches 1,2,4
stdout_has "(bubble % below theory at 2 points, such as M = 1 under 1f1b: the optimizer step, 59.0% of its step on average, is busy time, which the theory, of F and B alone, leaves out; without it that point's bubble is 63.2%)" \
    "sweep: the points below theory are counted and explained"
expect 0 "" -- simulate "$T/linear.model" --topology "$GPUS" --devices cuda:0,cuda:1 \
    --microbatches 4
check "simulate: no such line above theory" sh -c "! grep -qF 'below theory' '$OUT'"
# Virtual devices of one GPU share its arithmetic: four stages on cuda:0x4
# are not predicted much faster than the whole GPU's one stage, as four GPUs
# are (before, each virtual device counted as a GPU: 0.722 ms against
# 1.450, a ratio of 0.50). At batch 256: 3.33 ms on cuda:0x4, 2.91 on
# cuda:0, 2.15 on four GPUs. At batch 64 the host's fixed costs per op,
# which four stages' threads pay at once, bound all three (0.72 of cuda:0's
# step on cuda:0x4, 0.85 of that on four GPUs); on the H200 the measured
# ratio of cuda:0x4 to cuda:0 ran 0.48 to 1.17.
for devices in cuda:0 cuda:0x4 cuda:0,cuda:1,cuda:2,cuda:3; do
    expect 0 "" -- simulate "$ROOT/examples/conv_balanced.model" --topology "$GPUS" \
        --devices "$devices" --microbatches 4 --batch 256 --metrics "$T/share-$devices.json"
done
check "cuda:0x4 is predicted at most 30% faster than cuda:0; four GPUs faster still" python3 -c '
import json, sys
step = [json.load(open(sys.argv[1] + "/share-" + d + ".json"))["timeline"]["step_s"]
        for d in ("cuda:0", "cuda:0x4", "cuda:0,cuda:1,cuda:2,cuda:3")]
assert step[1] >= 0.7 * step[0] and step[2] < 0.8 * step[1], step' "$T"
expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --trace "$T/cpus.trace.json"
file_check "simulate on CPU devices: no link events" "$T/cpus.trace.json" '
assert not [e for e in p["traceEvents"] if e.get("cat") == "link" or "link" in e["name"]]
assert [e for e in p["traceEvents"] if e.get("cat") == "send"]'
# A trace past 100 MiB says its size and how to make it smaller; a small
# one says nothing of it.
check "a small trace: no note of its size" sh -c "! grep -q 'the trace is' '$ERR'"
expect 0 " MiB, 600 steps: a trace viewer reads all of it before it shows any; fewer --steps make it smaller" \
    -- simulate "$MODEL" --devices cpu:4 --microbatches 64 --steps 600 --trace "$T/large.trace.json"
rm -f "$T/large.trace.json"

if [ -s "$P" ]; then
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --profile "$P"
    stdout_has "costs from $P" "simulate --profile"
    stdout_has "bubble: simulated" "simulate --profile"
    expect 0 "" -- plan "$MODEL" --devices cpu:2 --microbatches 4 --profile "$P" --json
    json_check "plan --profile predicts from the profile" '
assert p["fits"] is True and p["step_ms"] > 0'
fi

# Nearly equal stages come near the theory: the balanced MLP split in half
# (the optimizer step, done by both devices at once, and the last dense
# layer on stage 1 keep its bubble off 1/9). The exact figures, from the analytic cost model (stages/cost_model.h) and
# the layer shapes: micro-batches of n = 64/8 = 8 samples on cores of
# R = 80 GFLOP/s and o = 0.1 us an op; FLOPs per sample: dense 2*in*units,
# relu 9.6 a value forward and 28 dX (0.12 and 0.35 ns at R: 9830 and 28672
# a sample, whole FLOPs), softmax_cross_entropy 416 a class forward and 26
# dX (5.2 and 0.33 ns: 4160 and 264); a backward twice the
# forward (2 ops) for a layer with weights, once (1 op) for the others; a
# dense layer's forward and dX at least its weights' bytes at W = 12 GB/s
# (both dense layers here are past it: 0.35 ms against 0.21 ms).
# Stage 0 is flatten, dense 1024, relu, dense 1024, relu (5 ops forward, 6
# backward: the flatten's dX, the model's first layer's, is never run); stage 1 dense 1024, relu, dense 1024, relu, dense 10, softmax
# (6 and 9). A crossing of 8 x 1024 floats is a copy of c at 10 GB/s by the
# sender, 5 us of hand-over, and a copy of c by the receiver; Adam's update
# and the zeroing of the gradients after it stream 8 x 4 bytes a parameter
# at 50 GB/s, and the check of the gradients after a stage's last backward
# reads 4 (K0, K1). Stage 1 is the slower (F1 > F0, B1 > B0), so GPipe's
# step is F0 + c + t + 8 (c + F1) + 8 (B1 + c) + K1 + t + c + B0 + K0, then
# both updates at once (the slower, S1).
MLP=$ROOT/examples/mlp_balanced.model
expect 0 "" -- simulate "$MLP" --devices cpu:2 --split 5 --microbatches 8 --schedule gpipe \
    --metrics "$T/mlp.json"
file_check "mlp_balanced split at 5: step and bubble from the cost model" "$T/mlp.json" '
n, R, o, W = 8, 80e9, 1e-7, 12e9
d, c = 2 * 1024 * 1024, 2 * 1024 * 10
D = max(d * n / R, 4 * (1024 * 1024 + 1024) / W)  # a dense 1024 forward, or its dX
C = max(c * n / R, 4 * (1024 * 10 + 10) / W)  # the dense 10
rf, rb = 9830, 28672  # a relu forward and dX, a sample
F0 = 2 * D + 2 * rf * n / R + 5 * o
B0 = 2 * (D + d * n / R) + 2 * rb * n / R + 6 * o
F1 = 2 * D + C + (2 * rf + 4160) * n / R + 6 * o
B1 = 2 * (D + d * n / R) + C + (2 * rb + c + 264) * n / R + 9 * o
assert D > d * n / R and C > c * n / R, "the weights bound both"
c, t = 8 * 1024 * 4 / 10e9, 5e-6
P0, P1 = 2 * (1024 * 1024 + 1024), 2 * (1024 * 1024 + 1024) + 1024 * 10 + 10
S0, S1 = 8 * 4 * P0 / 50e9, 8 * 4 * P1 / 50e9
K0, K1 = 4 * P0 / 50e9, 4 * P1 / 50e9
step = F0 + c + t + 8 * (c + F1) + 8 * (B1 + c) + K1 + t + c + B0 + K0 + S1  # 18.2828 ms
busy = 8 * (F0 + B0 + 2 * c) + K0 + S0 + 8 * (F1 + B1 + 2 * c) + K1 + S1
bubble = 1 - busy / (2 * step)
tl = p["timeline"]
assert abs(tl["bubble_theory"] - 1 / 9) < 1e-12, tl["bubble_theory"]
assert abs(tl["step_s"] - step) < 1e-12, (tl["step_s"], step)
assert abs(tl["bubble_measured"] - bubble) < 1e-12, (tl["bubble_measured"], bubble)'

# The same files as train: trace, timeline and metrics.
expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --schedule zb-h1 \
    --trace "$T/sim.trace.json" --timeline "$T/sim.svg" --metrics "$T/sim.json"
file_check "simulate --trace is a Chrome trace" "$T/sim.trace.json" '
events = [e for e in p["traceEvents"] if e.get("ph") == "X" and e["cat"] != "span"]
assert events, "no events"
assert {e["pid"] for e in events} == {0, 1}
assert any(e["name"].startswith("W") for e in events)
spans = [e for e in p["traceEvents"] if e.get("ph") == "X" and e["cat"] == "span"]
assert [(e["pid"], e["name"]) for e in spans] == [(2, "step %d" % i) for i in range(3)], spans
metrics = json.load(open(sys.argv[1].replace("sim.trace.json", "sim.json")))
mean = sum(e["dur"] for e in spans) / 3 / 1e6
assert abs(mean - metrics["timeline"]["step_s"]) <= 1e-8 + 1e-6 * mean, (mean, metrics)'
check "simulate --timeline is SVG" grep -q "<svg" "$T/sim.svg"
run plan "$MODEL" --devices cpu:2 --microbatches 4 --schedule zb-h1 --json
cp "$OUT" "$T/plan.json"
file_check "simulate --metrics: summary and plan stages" "$T/sim.json" '
q = json.load(open(sys.argv[1].replace("sim.json", "plan.json")))
t = p["timeline"]
for key in ("step_s", "bubble_measured", "bubble_theory", "devices", "stages"):
    assert key in t, key
assert t["measured"] is False and t["schedule"] == "zb-h1" and t["steps"] == 3
assert p["samples_per_s"] > 0 and p["microbatches"] == 4
assert len(p["stages"]) == len(q["stages"]) == 2
for a, b in zip(p["stages"], q["stages"]):
    assert set(a) == set(b), (set(a), set(b))
    assert a == b, (a, b)
# Parameters from the layer shapes, 4 bytes each: stage 0 has the conv2d
# (32 filters of 1 x 3 x 3, and 32 biases), stage 1 the dense layers
# (13 x 13 x 32 = 5408 inputs x 128 + 128, and 128 x 10 + 10); grads as
# many, Adam twice as many.
for s, params in zip(p["stages"], (32 * 9 + 32, 5408 * 128 + 128 + 128 * 10 + 10)):
    c = s["peak_by_category"]
    assert c["params"] == c["grads"] == 4 * params, (c, 4 * params)
    assert c["optimizer"] == 8 * params, (c, 8 * params)'

# --- the planner's choices -----------------------------------------------------

expect 0 "chose --microbatches" -- plan "$MODEL" --devices cpu:2 --microbatches auto
stdout_has "2 stages on cpu:0, cpu:1; 1f1b" "plan --microbatches auto"
expect 0 "chose --microbatches" -- simulate "$MODEL" --devices cpu:2 --microbatches auto
# Under a memory cap the choice fits: 16M leaves out M = 1 (stage 0 then needs over 20 MiB).
expect 0 "every stage fits" -- plan "$MODEL" --devices cpu:2 --microbatches auto \
    --device-mem 16M --json
json_check "--microbatches auto under 16M fits with M > 1" '
assert p["fits"] is True and p["microbatches"] > 1, p["microbatches"]
assert all(s["peak_bytes"] <= 16 << 20 for s in p["stages"]), p["stages"]'
expect 0 "chose --microbatches" -- plan "$MODEL" --devices cpu:2 --microbatches auto \
    --schedule auto --json
check "--schedule auto prints its choice" grep -qF -- "--schedule " "$ERR"
# The plan is the choice stderr names: "chose --microbatches M --schedule S:".
cp "$ERR" "$T/chose.err"
json_check "--schedule auto: the plan is the choice it prints" '
import re
m = re.search(r"chose --microbatches (\d+) --schedule ([a-z0-9-]+):",
              open(sys.argv[2] + "/chose.err").read())
assert m, "no chose line"
assert p["schedule"] == m.group(2), (p["schedule"], m.group(2))
assert p["microbatches"] == int(m.group(1)), (p["microbatches"], m.group(1))'
expect 0 "chose --microbatches" -- train "$MODEL" --data synthetic --steps 1 --batch 16 \
    --devices cpu:2 --microbatches auto --metrics "$T/auto.json"
cp "$ERR" "$T/chose.err"
file_check "train --microbatches auto trains with the M it chose" "$T/auto.json" '
import re
m = re.search(r"chose --microbatches (\d+):", open(sys.argv[1].replace("auto.json", "chose.err")).read())
assert m, "no chose line"
assert p["microbatches"] == int(m.group(1)), (p["microbatches"], m.group(1))'
expect 2 "--microbatches: expected an integer" -- plan "$MODEL" --microbatches many
# Nothing fits at any count: the advice says at which count it priced its changes.
expect 2 "what would help (each at --microbatches 64, what auto fell back on; once a change fits, auto may choose another):" \
    -- plan "$MODEL" --devices cpu:2 --microbatches auto --device-mem 8M
check "the advice's step is the fallback count's" grep -qF \
    "  --optimizer sgd                  fits: largest stage 5.42 MiB, step 31.412 ms" "$ERR"
# --chunks is interleaved's: at M = 1 < K interleaved cannot run, so auto
# picks another schedule with one chunk a device, and train runs it.
expect 0 "(one chunk a device: --chunks is interleaved's)" -- train "$MODEL" --data synthetic \
    --steps 1 --batch 16 --devices cpu:2 --schedule auto --chunks 2 --microbatches 1 \
    --metrics "$T/chunks.json"
file_check "train --schedule auto --chunks 2 at M = 1 runs two stages" "$T/chunks.json" '
assert p["timeline"]["chunks"] == 1 and p["schedule"] != "interleaved", p["schedule"]
assert len(p["stages"]) == 2, len(p["stages"])'
# A --split for V chunks a device is interleaved's alone; one for a stage a
# device is the others', --chunks dropped; each says what it leaves out.
expect 0 "chose --schedule interleaved" -- plan "$MODEL" --devices cpu:2 --schedule auto \
    --chunks 2 --microbatches 2 --split 2,4,6
check "a split of V chunks a device says auto tries interleaved alone" grep -qF \
    "note: --split gives 3 boundaries, for --chunks 2's 4 stages: --schedule auto tries interleaved alone" "$ERR"
expect 0 "note: --split gives 1 boundary, a stage a device: --schedule auto leaves out interleaved" \
    -- plan "$MODEL" --devices cpu:2 --schedule auto --chunks 2 --microbatches 4 --split 4 --json
json_check "--schedule auto on a split of a stage a device picks another schedule, one chunk" '
assert p["schedule"] != "interleaved" and p["chunks"] == 1, (p["schedule"], p["chunks"])
assert [s["layers"][0] for s in p["stages"]] == [0, 4], p["stages"]'
expect 2 "--split gives 2 boundaries; --schedule auto with --chunks 2 on 2 devices takes 1 (a stage a device: gpipe, 1f1b, zb-h1) or 3 (--chunks 2 a device: interleaved)" \
    -- simulate "$MODEL" --devices cpu:2 --schedule auto --chunks 2 --microbatches 4 --split 2,4

# --- memory: --device-mem everywhere -------------------------------------------

for cmd in plan simulate train sweep; do
    expect 2 "--device-mem: expected a size" -- "$cmd" "$MODEL" --device-mem 12QB
done
expect 2 "brigade simulate: does not fit: stage 0" -- simulate "$MODEL" --devices cpu:2 \
    --device-mem 4M
# train refuses what does not fit with plan's message, before training.
run plan "$MODEL" --devices cpu:2 --device-mem 4M
sed -n 's/^brigade plan: //p' "$ERR" >"$T/plan.refusal"
expect 2 "brigade train: does not fit: stage 0 (layers 0-3 on cpu:0) needs " -- \
    train "$MODEL" --data synthetic --steps 1 --devices cpu:2 --device-mem 4M
sed -n 's/^brigade train: //p' "$ERR" >"$T/train.refusal"
check "train's refusal is plan's" cmp -s "$T/plan.refusal" "$T/train.refusal"
check "train's refusal says what would help" grep -qF "what would help" "$ERR"
check "train refuses before training" test ! -s "$OUT"
expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 16 --devices cpu:2 \
    --device-mem 64M
cp "$ERR" "$T/train.err"
run plan "$MODEL" --batch 16 --devices cpu:2 --device-mem 64M --json
planned=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["stages"][1]["layers"][0])' <"$OUT")
check "train without --split uses the planner's split" \
    grep -qF "split $planned (the planner's)" "$T/train.err"
# At one micro-batch the stages run one after the other: the planner keeps
# the split of the shortest predicted step, there the least total time (the
# dense layers on stage 0); at 8 the slowest stage sets the step and the
# two objectives agree.
check "plan at M = 1 minimises the predicted step" test "$planned" = 7
run plan "$MODEL" --batch 16 --devices cpu:2
check "plan at M = 1 says why its split" \
    grep -qF "split chosen by the planner (shortest predicted step: M x the slowest stage" "$OUT"
check "plan at M = 1 gives the other split's simulated step" \
    grep -qE "; [0-9.]+ ms simulated against [0-9.]+ for the slowest stage's split;" "$OUT"
# ... and that it simulated each of the 7 splits, and kept the fastest.
stdout_has "; the fastest simulated of its 7 splits, 7 of which fit)" \
    "plan at M = 1: every split simulated"
run plan "$MODEL" --batch 16 --devices cpu:2 --json
file_check "plan --json at M = 1 names the split's objective" "$OUT" '
assert p["split"] == "least_step" and p["stages"][1]["layers"][0] == 7, p["split"]
assert p["other_split_simulated_step_ms"] > p["simulated_step_ms"], p'
run plan "$MODEL" --batch 16 --devices cpu:2 --microbatches 8
check "plan at M = 8 says why its split" \
    grep -qF "split chosen by the planner (slowest stage minimised; the fastest simulated of its 7 splits, 7 of which fit)" "$OUT"
run plan "$MODEL" --batch 16 --devices cpu:2 --microbatches 8 --json
file_check "plan --json at M = 8 names the split's objective" "$OUT" '
assert p["split"] == "slowest_stage" and p["stages"][1]["layers"][0] == 4, p["split"]
assert "other_split_simulated_step_ms" not in p, p'
run plan "$MODEL" --batch 16 --devices cpu:2 --split 3 --json
file_check "plan --json says a given split is given" "$OUT" 'assert p["split"] == "given", p["split"]'

# --- sweep --simulate ----------------------------------------------------------

expect 0 "" -- sweep "$MODEL" --devices cpu:2 --simulate --microbatches 1,2,4,8 \
    --schedule gpipe,1f1b --steps 3 --chart "$T/chart.svg" --metrics "$T/sweep.json"
check "sweep --metrics says where it wrote" \
    grep -qxF "metrics written to $T/sweep.json" "$ERR"
check "sweep --simulate prints a row per M and schedule, with no spread" \
    test "$(grep -cE '^ +[1248] +(gpipe|1f1b) +[0-9.]+ +- ' "$OUT")" -eq 8
check "sweep --simulate chart is SVG marked simulated" grep -qF "1f1b (simulated)" "$T/chart.svg"
# A sweep row is the simulation of its point: M = 4 1f1b's step ms,
# samples/s and bubble % are simulate's (3 steps, its default), to the
# printed precision, and its metrics are simulate's, key by key.
grep -E '^ +4 +1f1b ' "$OUT" >"$T/sweep.row"
expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 4 --schedule 1f1b \
    --metrics "$T/sim4.json"
file_check "sweep --simulate row M=4 1f1b is simulate's" "$T/sim4.json" '
row = open(sys.argv[1].replace("sim4.json", "sweep.row")).read().split()
assert row[:2] == ["4", "1f1b"], row
ms = p["timeline"]["step_s"] * 1e3
assert row[2] == "%.*f" % (3 if ms < 0.1 else 2, ms), (row, ms)
assert row[3] == "-", row
assert row[4] == "%.0f" % p["samples_per_s"], (row, p["samples_per_s"])
assert row[5] == "%.1f" % (100 * p["timeline"]["bubble_measured"]), row
assert row[-1] == "%d" % p["stages"][1]["layers"][0], (row, p["stages"])  # the split, last
sweep = json.load(open(sys.argv[1].replace("sim4.json", "sweep.json")))
assert sweep["complete"] is True and sweep["simulated"] is True, sweep
assert [(q["schedule"], q["microbatches"]) for q in sweep["points"]] == [
    (s, m) for s in ("gpipe", "1f1b") for m in (1, 2, 4, 8)], sweep["points"]
q = sweep["points"][6]
assert q["stages"] == p["stages"], (q["stages"], p["stages"])
assert q["timeline"] == p["timeline"], (q["timeline"], p["timeline"])
assert q["samples_per_s"] == p["samples_per_s"], q
# Simulated steps are alike, but for the rounding of their clock.
for k in ("step_min_s", "step_max_s"):
    assert abs(q["timeline"][k] / p["timeline"]["step_s"] - 1) < 1e-12, q'
if [ -s "$P" ]; then
    expect 0 "" -- sweep "$MODEL" --devices cpu:2 --simulate --microbatches 2,4 --profile "$P"
    check "sweep --simulate --profile prints a row per M" \
        test "$(grep -cE '^ +[24] +1f1b +[0-9.]+ ' "$OUT")" -eq 2
fi
expect 0 "" -- sweep "$MODEL" --devices cpu:2 --simulate --microbatches 1,4 --device-mem 16M \
    --metrics "$T/skip.json"
check "sweep --simulate skips what does not fit" grep -qE '^ +1 +1f1b +skipped: does not fit' "$OUT"
file_check "sweep --metrics: a skipped point says why, the other has figures" "$T/skip.json" '
a, b = p["points"]
assert a["microbatches"] == 1 and a["skipped"].startswith("does not fit: stage 0 (on cpu:0) is "), a
assert "timeline" not in a and "stages" not in a, a
assert b["microbatches"] == 4 and "skipped" not in b and b["samples_per_s"] > 0, b
assert p["complete"] is True and "error" not in p, p'
# A point that fails (here: 1,000 steps of M=65536 on 4 stages would record
# past the half an int's count of events a timeline holds, on any machine)
# ends the sweep, but the chart and metrics keep the points before it.
expect 2 "brigade sweep: stopped after 1 of 3 points; the chart and metrics have those done" \
    -- sweep "$MODEL" --devices cpu:4 --simulate --microbatches 2,65536,4 --batch 65536 \
    --steps 1000 --device-mem 1T --chart "$T/failed.svg" --metrics "$T/failed.json"
check "a failed point names itself and why" \
    grep -qF "brigade sweep: 1f1b M=65536: timeline: recording up to " "$ERR"
check "a failed sweep's chart has the point before it" \
    test "$(grep -c '<circle class="point"' "$T/failed.svg")" -eq 1
file_check "a failed sweep's metrics: the point before it and the error" "$T/failed.json" '
assert [q["microbatches"] for q in p["points"]] == [2], p["points"]
assert p["complete"] is False and p["error"].startswith("1f1b M=65536: timeline: "), p
assert "stop_signal" not in p, p'
# A sweep takes the optimizer, whose state is memory: its rows' memory is
# the plan's for the same optimizer (SGD none, Adam twice the parameters).
for opt in sgd adam; do
    expect 0 "" -- sweep "$MODEL" --devices cpu:2 --simulate --microbatches 4 --optimizer "$opt"
    sed -n 's/^ *4  1f1b .* \([0-9.]*\/[0-9.]*\)  *[0-9,]*$/\1/p' "$OUT" >"$T/sweep-$opt.peaks"
    expect 0 "" -- plan "$MODEL" --devices cpu:2 --microbatches 4 --optimizer "$opt" --json
    json_check "sweep --optimizer $opt: each stage's memory is the plan's" "
got = open(sys.argv[2] + '/sweep-$opt.peaks').read().split()
want = '/'.join('%.1f' % (s['peak_bytes'] / 2**20) for s in p['stages'])
assert got == [want], (got, want)"
done
check "SGD's stages hold less than Adam's" sh -c "! cmp -s '$T/sweep-sgd.peaks' '$T/sweep-adam.peaks'"
usage_error "--momentum is an SGD setting; this run uses --optimizer adam" -- \
    sweep "$MODEL" --devices cpu:2 --simulate --microbatches 4 --momentum 0.9
# Where M does not divide the batch the micro-batches differ by a sample
# (63 of 64: one of 2, 62 of 1), and the step goes by their mean: M=63 is
# within 2% of M=64 (one micro-batch fewer, each reading the dense
# weights), where pricing each at the largest (2) made it 1.7x.
for m in 63 64; do
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches "$m" \
        --metrics "$T/m$m.metrics.json"
done
check "a step at M=63 of 64 is priced by the mean micro-batch" python3 -c "import json, sys
a, b = (json.load(open(f))['timeline']['step_s'] for f in sys.argv[1:3])
assert abs(a / b - 1) < 0.02, (a, b)" "$T/m63.metrics.json" "$T/m64.metrics.json"

# A report's reader that closes early (`--trace >(head -c 100)`) fails that
# report (exit 1, Broken pipe) and not the command: the timeline and the
# metrics after it are still written, and the summary printed. The trace
# (640 KB) is more than a pipe holds, so the write meets the closed end.
if mkfifo "$T/early.fifo"; then
    rm -f "$T/early.ready" "$T/early.svg" "$T/early.metrics.json"
    python3 -c '
import os, select, sys
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)
open(sys.argv[2], "w").close()
select.select([fd], [], [], 120)
os.read(fd, 100)
os.close(fd)' "$T/early.fifo" "$T/early.ready" &
    reader=$!
    wait_for "$T/early.ready"
    expect 1 "brigade simulate: trace: cannot write '$T/early.fifo': Broken pipe" -- \
        simulate "$ROOT/examples/fashion_mlp.model" --batch 256 --microbatches 64 --devices cpu:4 \
        --trace "$T/early.fifo" --timeline "$T/early.svg" --metrics "$T/early.metrics.json"
    wait "$reader"
    stdout_has "bubble" "a report's closed reader: the summary is still printed"
    file_check "a report's closed reader: the metrics are still written" \
        "$T/early.metrics.json" "assert p['timeline']['step_s'] > 0"
    check "a report's closed reader: the timeline is still written" \
        grep -q "</svg>" "$T/early.svg"
fi

finish
