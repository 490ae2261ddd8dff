#!/bin/sh
# One training step of a model at batch 64 on one thread: brigade beside
# PyTorch (BRIGADE_PYTHON, else python3, when it has torch), and the ratio.
#   bench/step_time.sh [BUILD_DIR [MODEL]]
# (default: build, examples/fashion_cnn.model, the origin CNN). The goal of
# issue 2 is brigade <= 0.33x PyTorch's step time on the origin CNN.
set -eu
build=${1:-build}
model=${2:-examples/fashion_cnn.model}
root=$(cd "$(dirname "$0")/.." && pwd)
case $model in /*) ;; *) model=$PWD/$model ;; esac
case $build in /*) ;; *) build=$PWD/$build ;; esac
cd "$root"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ours=$("$build/bench/bench_step" "$model" --batch 64 --steps 300)
echo "$ours" | grep -v '^brigade_step_ms'
b=$(echo "$ours" | awk '/^brigade_step_ms/ {print $2}')
py=${BRIGADE_PYTHON:-python3}
if "$py" -c 'import torch' 2>/dev/null; then
    theirs=$("$py" bench/step_pytorch.py --model "$model" --batch 64 --steps 300)
    echo "$theirs" | grep -v '^pytorch_'
    p=$(echo "$theirs" | awk '/^pytorch_step_ms/ {print $2}')
    awk -v b="$b" -v p="$p" 'BEGIN { printf "ratio brigade/pytorch step time: %.3f (goal <= 0.33)\n", b / p }'
else
    echo "$py has no torch: no PyTorch figure (apt-get install python3-torch, or BRIGADE_PYTHON=...)"
fi
