#!/bin/sh
# Tests of the brigade command line: exit statuses (0 ok, 1 failure while
# running, 2 bad usage or bad input), the messages that name what is wrong,
# and a short real training run with its metrics and checkpoint.
#
# usage: test_cli.sh PATH/TO/brigade
# Runs from any directory; examples/ is found through $BRIGADE_SOURCE_ROOT
# (set by meson) or else next to this script.

TEST_NAME=cli
. "$(dirname "$0")/cli_harness.sh"

# --- usage -----------------------------------------------------------------

expect 2 "usage: brigade" --
check "no command prints nothing on stdout" test ! -s "$OUT"
expect 0 "" -- --help
stdout_has "train" "brigade --help"
stdout_has "summary" "brigade --help"
expect 2 "unknown command 'frobnicate'" -- frobnicate
expect 0 "" -- topo --topology "$ROOT/tests/fixtures/two-socket-8-core.xml"
stdout_has "2 packages, 2 NUMA nodes" "brigade topo --topology"
stdout_has "  cpu:0         X     NODE     NODE     NODE      SYS" "topo link matrix"
expect 2 "not a readable hwloc XML" -- topo --topology "$T/missing.xml"
expect 0 "" -- topo --topology "$ROOT/tests/fixtures/two-socket-8-gpu.xml"
stdout_has "   5 0000:93:00.0   10de:2335        1        1 cuda:5    140.0 GiB" "topo GPU table"
stdout_has "  gpu0       X    PIX    PHB    PHB    SYS    SYS    SYS    SYS" "topo GPU links"
expect 0 "" -- train --help
stdout_has "--batch" "brigade train --help"
expect 0 "" -- summary --help

# --- summary ---------------------------------------------------------------

expect 0 "" -- summary "$MODEL"
stdout_has "693,962" "brigade summary"
stdout_has "softmax_cross_entropy" "brigade summary"
expect 2 "no MODEL" -- summary
expect 2 "unknown option '--bogus'" -- summary --bogus "$MODEL"
expect 2 "more than one MODEL" -- summary "$MODEL" "$MODEL"
# A model file that cannot be read is bad input (2), naming the path.
expect 2 "$T/missing.model" -- summary "$T/missing.model"
expect 2 "$T" -- summary "$T"

# Malformed specs: exit 2 with "FILE:LINE:COL: message".
spec_head='input channels=1 height=28 width=28'
printf '%s\nconv2d filters=4 kernel=3\nfoo units=3\nsoftmax_cross_entropy\n' "$spec_head" \
    >"$T/unknown.model"
expect 2 "$T/unknown.model:3:1: unknown layer 'foo'" -- summary "$T/unknown.model"

printf '%s\ndense units=abc\nsoftmax_cross_entropy\n' "$spec_head" >"$T/badvalue.model"
expect 2 "$T/badvalue.model:2:13:" -- summary "$T/badvalue.model"
check "bad value message names the value" grep -qF "units=abc" "$ERR"

printf '%s\ndense units=10 color=red\nsoftmax_cross_entropy\n' "$spec_head" >"$T/badkey.model"
expect 2 "$T/badkey.model:2:16:" -- summary "$T/badkey.model"

: >"$T/empty.model"
expect 2 "$T/empty.model:1:1:" -- summary "$T/empty.model"

printf 'input channels=1\000\001\002 height=28\n\377\376binary\n' >"$T/binary.model"
expect 2 "$T/binary.model:1:17:" -- summary "$T/binary.model"

{
    printf '%s #' "$spec_head"
    i=0
    while [ $i -lt 50 ]; do
        printf '%s' 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'
        i=$((i + 1))
    done
    printf '\ndense units=10\nsoftmax_cross_entropy\n'
} >"$T/longline.model"
expect 2 "$T/longline.model:1:" -- summary "$T/longline.model"
check "a 5000-byte line does not flood stderr" test "$(wc -c <"$ERR")" -lt 1000

printf '%s\ndense units=10\n' "$spec_head" >"$T/noloss.model"
expect 2 "$T/noloss.model:" -- summary "$T/noloss.model"

# --- train: usage errors -----------------------------------------------------

expect 2 "no MODEL" -- train
expect 2 "no MODEL" -- train --steps 1
expect 2 "unknown option '--bogus'" -- train "$MODEL" --bogus 3
expect 2 "unknown option '--bogus'" -- train "$MODEL" --bogus
expect 2 "more than one MODEL" -- train "$MODEL" "$MODEL"
expect 2 "--batch" -- train "$MODEL" --batch 0
expect 2 "--batch" -- train "$MODEL" --batch abc
expect 2 "--batch" -- train "$MODEL" --batch 12x
expect 2 "--lr" -- train "$MODEL" --lr -1
expect 2 "--lr" -- train "$MODEL" --lr nan
expect 2 "foo" -- train "$MODEL" --optimizer foo
expect 2 "--epochs" -- train "$MODEL" --epochs
expect 2 "--epochs" -- train "$MODEL" --epochs -1
expect 2 "--steps" -- train "$MODEL" --steps 0
expect 2 "--momentum" -- train "$MODEL" --momentum 2
expect 2 "--seed" -- train "$MODEL" --seed -5
expect 2 "$T/missing.model" -- train "$T/missing.model" --data synthetic --steps 1
expect 2 "$T/unknown.model:3:1:" -- train "$T/unknown.model" --data synthetic --steps 1
check "usage errors print nothing on stdout" test ! -s "$OUT"
# --tf32 only matters on GPUs; on CPU devices it is accepted and changes nothing.
expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 8 --tf32

# --- train: data errors ------------------------------------------------------

expect nonzero "/nonexistent/data" -- train "$MODEL" --data /nonexistent/data --steps 1

# IDX files of the wrong shape: 2 images of 4x4 where the model wants 28x28.
mkdir "$T/idx4x4"
for set in train t10k; do
    {
        printf '\000\000\010\003\000\000\000\002\000\000\000\004\000\000\000\004'
        head -c 32 /dev/zero
    } >"$T/idx4x4/$set-images-idx3-ubyte"
    printf '\000\000\010\001\000\000\000\002\001\002' >"$T/idx4x4/$set-labels-idx1-ubyte"
done
expect 2 "train-images-idx3-ubyte" -- train "$MODEL" --data "$T/idx4x4" --steps 1

# --- train: a short real run -------------------------------------------------

W=$T/W.safetensors
M=$T/M.json
if expect 0 "" -- train "$MODEL" --data synthetic --steps 3 --batch 16 --metrics "$M" \
    --save "$W"; then
    stdout_has "test accuracy" "short training run"
    check "checkpoint written" test -s "$W"
    check "metrics JSON has loss, test_accuracy, samples_per_s and steps == 3" \
        python3 -c '
import json, math, sys
m = json.load(open(sys.argv[1]))
for key in ("loss", "test_accuracy", "samples_per_s", "steps"):
    assert key in m, key
assert m["steps"] == 3, m["steps"]
assert math.isfinite(m["loss"]) and m["loss"] > 0, m["loss"]
assert 0 <= m["test_accuracy"] <= 1, m["test_accuracy"]
assert m["samples_per_s"] > 0, m["samples_per_s"]
' "$M"
    # Not a terminal: plain progress lines, no carriage returns or escapes.
    check "plain 'epoch' progress lines on stderr" grep -q '^epoch 1/1 step 3/3' "$ERR"
    tr -d '\r\033' <"$ERR" >"$T/stderr.plain"
    check "no carriage returns or escapes in progress" cmp -s "$ERR" "$T/stderr.plain"
    leftovers=
    for file in "$T"/W.safetensors?* "$T"/.W.safetensors*; do
        [ -e "$file" ] && leftovers="$leftovers $file"
    done
    check "no temporary files left beside the checkpoint:$leftovers" test -z "$leftovers"
fi

expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 16 --load "$W"
stdout_has "test accuracy" "training from a checkpoint"

# A truncated checkpoint is bad input naming the file.
head -c 100 "$W" >"$T/corrupt.safetensors"
expect 2 "$T/corrupt.safetensors" -- train "$MODEL" --data synthetic --steps 1 \
    --load "$T/corrupt.safetensors"
expect 2 "$T/nothing.safetensors" -- train "$MODEL" --data synthetic --steps 1 \
    --load "$T/nothing.safetensors"

# A checkpoint of another model: same tensor names, other shapes.
sed 's/units=128/units=64/' "$MODEL" >"$T/small.model"
if expect 0 "" -- train "$T/small.model" --data synthetic --steps 1 --batch 16 \
    --save "$T/small.safetensors"; then
    expect 2 "another model" -- train "$MODEL" --data synthetic --steps 1 \
        --load "$T/small.safetensors"
    check "another model: message names the file" grep -qF "$T/small.safetensors" "$ERR"
fi

# --- placement ---
expect 2 "--devices: 'gpu' is not a device list" -- train "$MODEL" --data synthetic --devices gpu
expect 2 "expected cpu:N" -- train "$MODEL" --data synthetic --devices cpu:0
expect 2 "device cuda:0/0: " -- train "$MODEL" --data synthetic --steps 1 --devices cuda:0x2
expect 2 "--stages 3 but --devices cpu:2 gives 2 devices" -- train "$MODEL" --data synthetic \
    --devices cpu:2 --stages 3
expect 2 "9 stages but the model has only 8 layers" -- train "$MODEL" --data synthetic \
    --stages 9
expect 2 "--split gives 2 boundaries; 2 stages need 1" -- train "$MODEL" --data synthetic \
    --stages 2 --split 2,4
expect 2 "--split: expected layer numbers" -- train "$MODEL" --data synthetic --stages 2 \
    --split x
expect 2 "stage 1 would start at layer 9" -- train "$MODEL" --data synthetic --steps 1 \
    --stages 2 --split 9
expect 2 "unknown schedule" -- train "$MODEL" --data synthetic --schedule pipedream
expect 2 "multiple of the device count" -- train "$MODEL" --data synthetic --steps 1 \
    --devices cpu:4 --schedule interleaved --chunks 2 --microbatches 6
expect 2 "--chunks applies only to the interleaved schedule" -- train "$MODEL" \
    --data synthetic --steps 1 --devices cpu:2 --chunks 2
expect 2 "would leave some empty" -- train "$MODEL" --data synthetic --steps 1 --batch 4 \
    --microbatches 8

# A real 2-stage run: the summary names both stages and the metrics list them.
M2=$T/pipeline.json
if expect 0 "placement: 2 stages on cpu:0, cpu:1; zb-h1, 4 micro-batches, recompute" -- \
    train "$MODEL" --data synthetic --steps 2 --batch 16 --devices cpu:2 --schedule zb-h1 \
    --microbatches 4 --recompute --split 4 --metrics "$M2"; then
    if grep -q "cpu:1" "$OUT" && python3 - "$M2" <<'PY'; then
import json, sys
m = json.load(open(sys.argv[1]))
stages = m["stages"]
assert len(stages) == 2, stages
assert stages[0]["layers"] == [0, 1, 2, 3], stages[0]["layers"]
assert stages[1]["layers"] == [4, 5, 6, 7], stages[1]["layers"]
assert stages[1]["device"] == "cpu:1"
assert m["schedule"] == "zb-h1" and m["microbatches"] == 4 and m["recompute"] is True
for s in stages:
    assert s["peak_bytes"] == sum(s["peak_by_category"].values()), s
assert stages[1]["peak_by_category"]["params"] == (5408 * 128 + 128 + 128 * 10 + 10) * 4
PY
        pass
    else
        fail "2-stage metrics"
    fi
fi

# --- resuming ---
R=$T/run.safetensors
if expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --save "$R" --save-every 1; then
    stdout_has "saved the training state at step 2" "--save"
fi
if expect 0 "resuming $R at step 2 (epoch 1, sample 32)" -- train "$MODEL" --data synthetic \
    --steps 3 --batch 16 --resume "$R" --save "$R"; then
    stdout_has "saved the training state at step 3" "--resume then --save"
fi
expect 2 "--load and --resume both give the weights" -- train "$MODEL" --data synthetic \
    --steps 1 --load "$R" --resume "$R"
expect 2 "$T/missing.safetensors" -- train "$MODEL" --data synthetic --steps 1 \
    --resume "$T/missing.safetensors"
expect 2 "saved with optimizer adam" -- train "$MODEL" --data synthetic --steps 4 --batch 16 \
    --resume "$R" --optimizer sgd

# An unwritable output fails, naming the path.
expect nonzero "$T/no/such/dir/M.json" -- train "$MODEL" --data synthetic --steps 1 --batch 16 \
    --metrics "$T/no/such/dir/M.json"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
