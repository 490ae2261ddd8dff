#!/bin/sh
# The benchmark scripts that only print figures (bench/*.sh), run briefly
# on the build so that a change to brigade's output or options cannot break
# them unnoticed: each must finish and print its table whole. The figures
# themselves are not checked (a benchmark's, not a test's).
#
#   tests/test_bench_scripts.sh BUILD_DIR   (run from meson: the build folder)
set -u
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
root=${BRIGADE_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
TEST_NAME=bench-scripts
. "$(dirname "$0")/harness.sh"
SHOW_FILE=$T/out

# bench/profile_sizes.sh: a row per M with the measured step and three
# predictions, then the mean errors.
MS="1 4" STEPS=2 sh "$root/bench/profile_sizes.sh" "$build" >"$T/out" 2>&1
rc=$?
check "profile_sizes.sh finishes (rc $rc)" test "$rc" -eq 0
number='[0-9]+\.[0-9]{2}'
prediction="$number \( *[-+][0-9]+%\)"
for m in 1 4; do
    check "profile_sizes.sh: a row for M=$m" grep -qE \
        "^ +$m +$number +$prediction +$prediction +$prediction$" "$T/out"
done
check "profile_sizes.sh: the mean errors last" sh -c \
    "tail -n 1 '$T/out' | grep -qE '^ +mean \|err\| +[0-9]+% +[0-9]+% +[0-9]+%$'"

# bench/eval_pytorch.py: PyTorch builds each example's network from its spec,
# loads brigade's checkpoint and scores it on the test set to the same four
# decimals as brigade's own evaluation (the same network, layer numbers and
# tensor layouts), where a Python with torch and safetensors is found
# (BRIGADE_PYTHON, else python3; CI has none, and says so).
py=${BRIGADE_PYTHON:-python3}
if "$py" -c 'import torch, safetensors' >/dev/null 2>&1; then
    for model in fashion_cnn fashion_cnn_dropout fashion_mlp fashion_resnet; do
        "$build/cli/brigade" train "$root/examples/$model.model" --steps 30 --devices cpu:2 \
            --microbatches 2 --save "$T/$model.safetensors" >/dev/null 2>&1
        "$build/cli/brigade" train "$root/examples/$model.model" --steps 0 \
            --load "$T/$model.safetensors" >"$T/out" 2>&1
        grep '^test accuracy' "$T/out" >"$T/brigade.txt"
        "$py" "$root/bench/eval_pytorch.py" "$root/examples/$model.model" \
            "$T/$model.safetensors" >"$T/out" 2>&1
        check "eval_pytorch.py: PyTorch scores $model as brigade ($(cat "$T/brigade.txt"))" \
            cmp -s "$T/out" "$T/brigade.txt"
    done
else
    echo "eval_pytorch.py not run: $py has no torch and safetensors"
fi
finish
