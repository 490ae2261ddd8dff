#!/bin/sh
# The main job: builds brigade and trains the origin CNN
# (examples/fashion_cnn.model) on Fashion-MNIST for 5 epochs with Adam,
# lr 1e-3, batch 64, as a 2-stage pipeline (two CPU devices, 1F1B, 4
# micro-batches), then prints the test accuracy and each stage's memory.
# Extra arguments are passed to `brigade train`, and replace the defaults
# above that they name (e.g. --epochs 1, or --steps 200 in place of
# --epochs; --optimizer sgd also drops --lr 0.001).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
sh scripts/ensure-deps.sh
[ -f build/build.ninja ] || meson setup build
ninja -C build
# given OPTION...: whether the caller's arguments name one of the options.
given() {
    for wanted in "$@"; do
        for arg in $extra; do
            [ "$arg" = "$wanted" ] && return 0
        done
    done
    return 1
}
extra=" $* "
defaults=""
given --epochs --steps || defaults="$defaults --epochs 5"
given --optimizer || defaults="$defaults --optimizer adam"
given --optimizer --lr || defaults="$defaults --lr 0.001"
given --batch || defaults="$defaults --batch 64"
given --devices || defaults="$defaults --devices cpu:2"
given --schedule || defaults="$defaults --schedule 1f1b"
given --microbatches || defaults="$defaults --microbatches 4"
# shellcheck disable=SC2086 # the defaults are words without spaces
exec ./build/cli/brigade train examples/fashion_cnn.model $defaults "$@"
