#!/bin/sh
# Builds brigade's libFuzzer targets with clang (ASan + UBSan, straight from
# the library sources below, no meson) and runs them.
#
#   sh scripts/fuzz.sh [-t SECONDS | -r RUNS] [-j JOBS] [TARGET...]
#
#   TARGET   model_spec, idx, safetensors, profile (default: all four, one
#            after another)
#   -t S     fuzz each target for S seconds (default 60)
#   -r N     fuzz each target for N executions instead
#   -j J     J fuzzing processes per target, sharing its corpus (default 1)
#
# Seeds are read from fuzz/corpus/TARGET (never written); new inputs go to
# build-fuzz/corpus/TARGET, crashes to build-fuzz/artifacts/, logs to
# build-fuzz/logs/. One line per target goes to build-fuzz/summary.txt:
# "TARGET ok|fail EXECUTIONS", and the executions are printed.
# Exit status: 0 all clean; 1 a finding or a failed build; 77 when clang
# or its libFuzzer runtime is missing (scripts/test.sh counts it skipped).
#
# A finding: reproduce with build-fuzz/fuzz_TARGET FILE, shrink it with
# build-fuzz/fuzz_TARGET -minimize_crash=1 -runs=100000 FILE, fix the
# parser, then add the input to fuzz/corpus/TARGET/ so that
# tests/test_fuzz_corpus.c replays it in every CI run (see fuzz/README.md).
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

seconds=60
runs=""
jobs=1
while getopts t:r:j: option; do
    case "$option" in
    t) seconds=$OPTARG ;;
    r) runs=$OPTARG ;;
    j) jobs=$OPTARG ;;
    *) sed -n '2,23p' "$0" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
targets=${*:-model_spec idx safetensors profile}

# The library code the targets reach (checkpoint.c needs crc32.c for its
# checksums, layer.c and rng.c for parameter counts, model_words.c for the
# layers in words, spelling.c for its guess of a misspelt word; the profile
# loader the optimizers' names).
sources="fuzz/targets.c lib/checkpoint.c lib/crc32.c lib/idx.c lib/layer.c lib/model_spec.c lib/rng.c \
lib/regular_file.c lib/safetensors.c lib/safetensors_write.c lib/spelling.c lib/atomic_file.c \
lib/byte_order.c \
lib/json_depth.c lib/model_words.c lib/parse.c lib/path.c lib/status.c lib/text_file.c lib/optimizer.c lib/utf8.c stages/profile_io.c \
stages/profile_pricing.c"
cc=${CLANG:-clang}
flags="-std=c11 -D_GNU_SOURCE -g -O1 -fno-omit-frame-pointer \
-fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -Ilib -Istages -Ifuzz"
libs="-lcjson -lz -lm"

out=build-fuzz
mkdir -p "$out/artifacts" "$out/logs"
: >"$out/summary.txt"

probe="$out/probe.c"
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$probe"
# shellcheck disable=SC2086
if ! command -v "$cc" >/dev/null 2>&1 || ! $cc $flags "$probe" -o "$out/probe" >/dev/null 2>&1; then
    echo "fuzz: $cc with libFuzzer (-fsanitize=fuzzer) not available; skipped"
    exit 77
fi

status=0
for target in $targets; do
    case "$target" in
    model_spec | idx | safetensors | profile) ;;
    *) echo "fuzz: unknown target '$target' (model_spec, idx, safetensors, profile)" >&2; exit 2 ;;
    esac
    binary="$out/fuzz_$target"
    # shellcheck disable=SC2086
    if ! $cc $flags "fuzz/fuzz_$target.c" $sources $libs -o "$binary"; then
        echo "$target fail 0" >>"$out/summary.txt"
        echo "fuzz: $target: build failed"
        status=1
        continue
    fi
    mkdir -p "$out/corpus/$target"
    rm -f "$out/logs/$target".*.log
    if [ -n "$runs" ]; then
        limit="-runs=$(((runs + jobs - 1) / jobs))"
    else
        limit="-max_total_time=$seconds"
    fi
    # -error_exitcode: libFuzzer's default, 77, would read as "skipped".
    j=1
    pids=""
    while [ "$j" -le "$jobs" ]; do
        "$binary" "$limit" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 \
            -timeout_exitcode=1 -print_final_stats=1 -dict="fuzz/$target.dict" \
            -artifact_prefix="$out/artifacts/$target-" \
            "$out/corpus/$target" "fuzz/corpus/$target" >"$out/logs/$target.$j.log" 2>&1 &
        pids="$pids $!"
        j=$((j + 1))
    done
    result=ok
    for pid in $pids; do
        wait "$pid" || result=fail
    done
    executions=$(cat "$out/logs/$target".*.log |
        sed -n 's/^stat::number_of_executed_units: *//p' | awk '{s += $1} END {print s + 0}')
    echo "$target $result $executions" >>"$out/summary.txt"
    echo "fuzz: $target: $result, $executions executions ($jobs process(es); logs in $out/logs)"
    if [ "$result" != ok ]; then
        status=1
        grep -h -A30 "ERROR\|fuzz property violated\|deadly signal" "$out/logs/$target".*.log |
            head -60 || true
    fi
done
exit $status
