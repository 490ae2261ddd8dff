#!/bin/sh
# bench/gpu-check.sh, the one script that runs on a GPU machine when a
# session is lent one (a few times a month, 15 minutes each), run here
# without a GPU so that it cannot rot between those runs, on a copy of the
# repository with only the build's paths that `--carry` lists (what the
# device machine gets): it must finish,
# write exactly its two result files (the device machine returns at most
# eight), give every row of its table, report the CUDA tests as skipped,
# and exit 1 (the op test did not pass). With a budget too short for any
# step it must still write the table, every step "out of time".
#
#   tests/test_gpu_check.sh BUILD_DIR   (run from meson: the build folder)
set -u
if [ $# -ne 1 ] || [ ! -d "$1" ]; then
    echo "usage: $0 BUILD_DIR" >&2
    exit 2
fi
build=$(cd "$1" && pwd)
root=${BRIGADE_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
TEST_NAME=gpu-check
. "$(dirname "$0")/harness.sh"
has_row() { grep -qE "^$1 +$2" "$T/$3/summary.txt"; }

# The script needs the brigade binary, the two CUDA tests and the hand-off
# benchmark of the build.
for exe in cli/brigade tests/test_cuda_ops tests/test_cuda_pipeline bench/bench_handoff; do
    if [ ! -x "$build/$exe" ]; then
        echo "gpu_check: $build/$exe is missing" >&2
        exit 2
    fi
done

# ---- a whole run without a GPU, on what the device machine would get ----
# The repository's files (not .git, not build folders) and, of the build,
# only the paths --carry names: a file the run needs but the list forgets
# fails here, not in a GPU session.
mkdir "$T/tree" "$T/full"
tar -C "$root" --exclude=./.git --exclude='./build*' --exclude=./bench/out -cf - . |
    tar -C "$T/tree" -xf -
for path in $(sh "$root/bench/gpu-check.sh" --carry "$build"); do
    [ -e "$path" ] || continue # made by --prepare: gpu-libs.tar.xz, data
    mkdir -p "$T/tree/carried/$(dirname "${path#"$build"/}")"
    cp -R "$path" "$T/tree/carried/${path#"$build"/}"
done
# The speed rows' brigade runs, made on CPU devices here (short), so that
# a command line a run would refuse fails here, not on the GPU.
(cd "$T/tree" && BUDGET=200 BRIGADE_GPU_CHECK_ON_CPU=1 sh bench/gpu-check.sh carried "$T/full") \
    >"$T/full.log" 2>&1
rc=$?
check "exits 1 when the op test did not pass (rc $rc)" test "$rc" -eq 1
check "writes exactly summary.txt and details.tar.gz" \
    test "$(find "$T/full" -mindepth 1 -printf '%f\n' | sort | tr '\n' ' ')" = \
    "details.tar.gz summary.txt "
check "prints the table last" sh -c "tail -n 1 '$T/full.log' | grep -qE '^results +'"
for row in 'GPU' 'test_cuda_ops' 'pipeline cuda:0x2, cuda:0x4' 'step, batch 64' \
    'step, batch 256' '4 stages, batch 256, M=4' 'exposed copy, cuda:0x4' 'host hand-off' \
    '5 epochs on cuda:0' 'memcheck \(no conv2d, stage\)' 'kernel times \(ncu\)' \
    'CUDA calls of a send'; do
    check "the table has the row '$row'" has_row "$row" '' full
done
for batch in 64 256; do
    check "brigade's step at batch $batch is measured" \
        has_row "step, batch $batch" ' *brigade [0-9.]+ ms, PyTorch .* copying its batch' full
done
check "PyTorch's step with its batch on the GPU has a row of its own" \
    test "$(grep -c "^  PyTorch's batch resident  *PyTorch .* with its batch on the GPU" \
        "$T/full/summary.txt")" -eq 2
check "four stages and one are measured, with their ratio" \
    has_row '4 stages, batch 256, M=4' '[0-9.]+ ms on cpu:4, [0-9.]+ ms on cpu: ratio [0-9.]+' full
check "the exposed copy is measured" has_row 'exposed copy, cuda:0x4' '[0-9.]+ of the step' full
check "an arithmetic-bound model on four shared stages and one, measured and simulated" \
    has_row 'conv_balanced, 64, M=4' '[0-9.]+ ms on cpu:4 \(simulated [0-9.]+\), [0-9.]+ ms on cpu \(simulated [0-9.]+\)' full
check "the exposed copy's parts add up to it" sh -c "
    awk '/^exposed copy, cuda:0x4/ {x = \$4} /^  its parts/ {
        s = \$4 + \$6 + \$13; ok = x > 0 && s > x - 0.0011 && s < x + 0.0011 && \$16 > 0 }
        END { exit !ok }' '$T/full/summary.txt'"
check "the op test skipped (exit 77)" has_row 'test_cuda_ops' '0 passed, 0 failed, rc 77' full
check "the pipeline test skipped" has_row 'pipeline cuda:0x2, cuda:0x4' 'skipped \(no GPU\)' full
# The hand-off needs no GPU: both figures are there.
check "the hand-off row has both medians" \
    has_row 'host hand-off' 'median [0-9.]+ us asleep, [0-9.]+ us polling' full
# The CUDA calls' benchmark (built with the CUDA backend) says there is no
# GPU; without the backend it was not built.
if [ -x "$build/bench/bench_cuda_calls" ]; then
    check "the CUDA calls' row says there is no GPU" \
        has_row 'CUDA calls of a send' 'not run: bench_cuda_calls: no CUDA GPU \(rc 1\)' full
else
    check "the CUDA calls' row says it was not built" \
        has_row 'CUDA calls of a send' 'not run \(no .*bench_cuda_calls\)' full
fi
check "details.tar.gz holds the op test's output" \
    sh -c "tar -tzf '$T/full/details.tar.gz' | grep -qx 'test_cuda_ops.txt'"
check "details.tar.gz holds brigade topo's account of the machine" \
    sh -c "tar -xzOf '$T/full/details.tar.gz' topo.txt | grep -q '^CUDA: '"

# ---- no time for any step: the table is still written ----
mkdir "$T/short"
(cd "$root" && BUDGET=20 sh bench/gpu-check.sh "$build" "$T/short") >"$T/short.log" 2>&1
rc=$?
check "out of time: exits 1 (rc $rc)" test "$rc" -eq 1
check "out of time: still writes both files" \
    test -s "$T/short/summary.txt" -a -s "$T/short/details.tar.gz"
check "out of time: the pipeline test is reported as skipped for time" \
    has_row 'pipeline cuda:0x2, cuda:0x4' 'skipped: out of time' short
check "out of time: the CUDA calls' benchmark too, where it was built" sh -c "
    [ ! -x '$build/bench/bench_cuda_calls' ] ||
        grep -qE '^CUDA calls of a send +skipped: out of time' '$T/short/summary.txt'"

finish
