#!/bin/sh
# What `meson install` lays out works where it lands: the installed brigade
# runs, finds the CUDA module installed beside it (LIBDIR/brigade), still
# finds it when the whole prefix is moved elsewhere (the search is relative
# to the program's folder), and a lone copy of the program says where it
# looked; the guides and example models are installed where its help says.
# Installs into a scratch DESTDIR; nothing is rebuilt.
#
# usage: test_install.sh BUILD_DIR PREFIX BINDIR LIBDIR CUDA(0|1) DATADIR

if [ $# -ne 6 ] || [ ! -d "$1" ]; then
    echo "usage: $0 BUILD_DIR PREFIX BINDIR LIBDIR CUDA DATADIR" >&2
    exit 2
fi
build=$1 prefix=$2 bindir=$3 libdir=$4 cuda=$5 datadir=$6
case $bindir in /*) ;; *) bindir=$prefix/$bindir ;; esac
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
case $datadir in /*) ;; *) datadir=$prefix/$datadir ;; esac
root=${BRIGADE_SOURCE_ROOT:-$(cd "$(dirname "$0")/.." && pwd)}

TEST_NAME=install
. "$(dirname "$0")/harness.sh"
T=$(cd -P "$T" && pwd) # brigade names the module by its real path
SHOW_FILE=$T/out

unset BRIGADE_CUDA_MODULE
check "meson install --destdir" sh -c "meson install -C '$build' --no-rebuild --quiet \
    --destdir '$T/root' >'$T/out' 2>&1"
# A prefix of / makes paths like //lib; the real path has one slash.
exe=$T/root$bindir/brigade
module=$(realpath -m "$T/root$libdir/brigade/libbrigade-cuda.so")
check "the program is installed in BINDIR" test -x "$exe"
check "the installed program runs a command" sh -c "'$exe' summary '$root/examples/fashion_cnn.model' \
    >'$T/out' 2>&1 && grep -q '^parameters: 693,962' '$T/out'"
# The guides and the models the help's examples name: installed, and the
# help says where (until 2026-12-06 neither was, and the examples failed
# outside the source tree).
share=$(realpath -m "$datadir/brigade")
check "the example models are installed in DATADIR/brigade/examples" \
    test -f "$T/root$share/examples/fashion_cnn.model"
check "the guides are installed in DATADIR/brigade/docs" test -f "$T/root$share/docs/training.md"
check "brigade --help says where they are installed" sh -c "'$exe' --help >'$T/out' 2>&1 && \
    tr '\\n' ' ' <'$T/out' | grep -qF 'installed in $share/docs and $share/examples.'"
check "the installed program runs its installed example" sh -c "'$exe' summary \
    '$T/root$share/examples/fashion_cnn.model' >'$T/out' 2>&1 && grep -q '^parameters: 693,962' '$T/out'"
if [ "$cuda" = 1 ]; then
    check "the CUDA module is installed in LIBDIR/brigade" test -f "$module"
    check "the installed program loads it" sh -c "'$exe' topo >'$T/out' 2>&1 && \
        grep -qF 'CUDA: built, ' '$T/out' && grep -qF '(backend $module)' '$T/out'"
    mv "$T/root" "$T/moved"
    moved=$(realpath -m "$T/moved$libdir/brigade/libbrigade-cuda.so")
    check "a moved prefix still finds its module" sh -c "'$T/moved$bindir/brigade' topo \
        >'$T/out' 2>&1 && grep -qF '(backend $moved)' '$T/out'"
    # A lone copy falls back to the configured LIBDIR/brigade: where brigade
    # is installed on this machine, it finds that one instead.
    if [ ! -e "$libdir/brigade/libbrigade-cuda.so" ]; then
        cp "$T/moved$bindir/brigade" "$T/lone"
        parent=$(dirname "$(realpath "$T")")
        check "a lone copy says where it looked, by name" sh -c "'$T/lone' topo >'$T/out' 2>&1 && \
            grep -qF 'libbrigade-cuda.so was not found (set BRIGADE_CUDA_MODULE to its path): not in $parent/lib or $parent/' '$T/out'"
    fi
else
    check "no CUDA module without the CUDA build" test ! -e "$module"
    check "the installed program says it has no CUDA backend" sh -c "'$exe' topo >'$T/out' 2>&1 && \
        grep -qF 'CUDA: this build has no CUDA backend' '$T/out'"
fi

finish
