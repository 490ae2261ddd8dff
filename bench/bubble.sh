#!/bin/sh
# Measured pipeline bubble against theory on the CPU backend (issue 4's bar):
# K = 2 CPU devices, M in {1,2,4,8,16}, GPipe and 1F1B, on a model that cuts
# into two equal halves. For each point prints the measured bubble, the
# theoretical (K-1)/(M+K-1), the measured stage imbalance, and whether the
# measured bubble lies within 3 points of theory + imbalance.
#   [MODEL=examples/conv_balanced.model SPLIT=4] bench/bubble.sh [BUILD_DIR]
# (build folder default: build; the model must cut into two halves at SPLIT)
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export OPENBLAS_NUM_THREADS=1
model=${MODEL:-examples/conv_balanced.model}
split=${SPLIT:-4}
out=$("$build/cli/brigade" sweep "$model" --devices cpu:2 --split "$split" \
    --microbatches 1,2,4,8,16 --schedule gpipe,1f1b --batch 64 --warmup 3 --steps 10 \
    --chart "${CHART:-/dev/null}")
echo "$out"
echo
# Columns: M, schedule, step ms, min-max ms, samples/s, bubble %, theory %,
# imbalance %, sim ms (err), peak MiB per stage, split.
echo "$out" | awk '$2 == "gpipe" || $2 == "1f1b" {
    limit = $7 + $8 + 3;
    verdict = ($6 <= limit) ? "within" : "OUTSIDE";
    printf "%-6s M=%-3s measured %5.1f%%  theory %5.1f%% + imbalance %5.1f%% + 3 = %5.1f%%  %s\n",
           $2, $1, $6, $7, $8, limit, verdict
}'
