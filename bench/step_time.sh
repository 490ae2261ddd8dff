#!/bin/sh
# One training step of the origin CNN at batch 64 on one thread: brigade
# beside PyTorch (Debian's python3-torch, if installed), and the ratio.
#   bench/step_time.sh [BUILD_DIR]        (default: build)
# The goal of issue 2 is brigade <= 0.33x PyTorch's step time.
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
ours=$("$build/bench/bench_step" examples/fashion_cnn.model --batch 64 --steps 300)
echo "$ours" | grep -v '^brigade_step_ms'
b=$(echo "$ours" | awk '/^brigade_step_ms/ {print $2}')
py=/usr/bin/python3
if "$py" -c 'import torch' 2>/dev/null; then
    theirs=$("$py" bench/step_pytorch.py --batch 64 --steps 300)
    echo "$theirs" | grep -v '^pytorch_'
    p=$(echo "$theirs" | awk '/^pytorch_step_ms/ {print $2}')
    awk -v b="$b" -v p="$p" 'BEGIN { printf "ratio brigade/pytorch step time: %.3f (goal <= 0.33)\n", b / p }'
else
    echo "python3-torch not installed: no PyTorch figure (apt-get install python3-torch)"
fi
