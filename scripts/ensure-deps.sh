#!/bin/sh
# Installs, from Debian's packages, whatever brigade needs that is missing.
# Used by scripts/train-example.sh and scripts/test.sh; safe to run again.
set -eu
packages="meson ninja-build pkg-config gcc libc6-dev python3 libhwloc-dev libcmocka-dev \
libopenblas-dev zlib1g-dev libcjson-dev dataset-fashion-mnist clang-format"
missing=""
for p in $packages; do
    status=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
    case "$status" in
    *"install ok installed"*) ;;
    *) missing="$missing $p" ;;
    esac
done
[ -z "$missing" ] && exit 0
echo "installing from Debian's packages:$missing"
if [ "$(id -u)" -eq 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
else
    echo "need root (or sudo) to install:$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# shellcheck disable=SC2086
$sudo apt-get install -y -q --no-install-recommends $missing
