#!/bin/sh
# The main job: builds brigade and trains the origin CNN
# (examples/fashion_cnn.model) on Fashion-MNIST for 5 epochs with Adam,
# lr 1e-3, batch 64, as a 2-stage pipeline (two CPU devices, 1F1B, 4
# micro-batches), then prints the test accuracy and each stage's memory.
# Extra arguments are passed to `brigade train` (e.g. --epochs 1).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
sh scripts/ensure-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
exec ./build/cli/brigade train examples/fashion_cnn.model --epochs 5 --optimizer adam \
    --lr 0.001 --batch 64 --devices cpu:2 --schedule 1f1b --microbatches 4 "$@"
