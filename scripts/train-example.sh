#!/bin/sh
# The main job: builds brigade and trains the origin CNN
# (examples/fashion_cnn.model) on Fashion-MNIST for 5 epochs with Adam,
# lr 1e-3, batch 64, then prints the test accuracy. Extra arguments are
# passed to `brigade train` (e.g. --epochs 1).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
sh scripts/ensure-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
exec ./build/cli/brigade train examples/fashion_cnn.model --epochs 5 --optimizer adam \
    --lr 0.001 --batch 64 "$@"
