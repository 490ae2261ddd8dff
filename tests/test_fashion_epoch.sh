#!/bin/sh
# Slow suite: one epoch of the origin CNN on the real Fashion-MNIST data must
# reach at least 0.85 test accuracy (PyTorch 1.13: 0.886 after one epoch).
# Skips (exit 77) when Debian's dataset-fashion-mnist is not installed.
set -eu
brigade=$1
root=${BRIGADE_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}
if [ ! -e /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
    echo "dataset-fashion-mnist not installed: skipped"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$brigade" train "$root/examples/fashion_cnn.model" --epochs 1 --metrics "$tmp/m.json" >"$tmp/out" 2>"$tmp/err"
cat "$tmp/out"
acc=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["test_accuracy"])' "$tmp/m.json")
if python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) >= 0.85 else 1)' "$acc"; then
    echo "1 passed, 0 failed"
else
    echo "test accuracy $acc < 0.85 after one epoch"
    echo "0 passed, 1 failed"
    exit 1
fi
