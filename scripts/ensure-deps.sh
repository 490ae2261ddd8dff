#!/bin/sh
# Installs, from Debian's packages, whatever brigade needs that is missing.
# Used by scripts/train-example.sh and scripts/test.sh; safe to run again.
set -eu
# g++: nvcc compiles with it, and a CUDA build links libstdc++.
packages="meson ninja-build pkg-config gcc g++ libc6-dev python3 libhwloc-dev libcmocka-dev \
libopenblas-dev zlib1g-dev libcjson-dev libxml2-dev dataset-fashion-mnist clang-format"
# For the fuzz targets (scripts/fuzz.sh): clang and its libFuzzer runtime,
# Debian 12's names. Installed when the archive has them; without them the
# fuzz smoke is skipped, nothing else needs them.
optional="clang libclang-rt-14-dev"
installed() {
    case "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" in
    *"install ok installed"*) return 0 ;;
    *) return 1 ;;
    esac
}
missing=""
for p in $packages; do
    installed "$p" || missing="$missing $p"
done
missing_optional=""
for p in $optional; do
    installed "$p" || missing_optional="$missing_optional $p"
done
[ -z "$missing$missing_optional" ] && exit 0
echo "installing from Debian's packages:$missing$missing_optional"
if [ "$(id -u)" -eq 0 ]; then
    sudo=""
elif command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
elif [ -z "$missing" ]; then
    echo "no root (or sudo) to install the optional$missing_optional; going on without"
    exit 0
else
    echo "need root (or sudo) to install:$missing" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
for p in $missing_optional; do
    if apt-cache show "$p" >/dev/null 2>&1; then
        missing="$missing $p"
    else
        echo "optional package $p is not in the archive; skipping it"
    fi
done
[ -z "$missing" ] && exit 0
# shellcheck disable=SC2086
$sudo apt-get install -y -q --no-install-recommends $missing
