#!/bin/sh
# The whole test suite, as CI runs it (.ci/run calls exactly this):
#   1. formatting check (clang-format, .clang-format)
#   2. release build with -Werror: unit and slow suites
#   3. ASan+UBSan build with -Werror: unit suite
#   4. ThreadSanitizer build: the tests of multi-threaded code (suite threads)
#   5. fuzz smoke: each libFuzzer target for 30 s (scripts/fuzz.sh; skipped
#      without clang), one result per target
# Installs missing Debian packages first. Ends with "N passed, M failed".
set -eu
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
sh scripts/ensure-deps.sh

echo "== formatting"
unformatted=""
for f in $(git ls-files '*.c' '*.h' '*.inc' '*.cu' 2>/dev/null || find lib stages scheduler cli bench tests -name '*.[ch]' -o -name '*.cu'); do
    if ! clang-format --style=file "$f" | cmp -s - "$f"; then
        unformatted="$unformatted $f"
    fi
done
format_failed=0
if [ -n "$unformatted" ]; then
    echo "not clang-formatted (run clang-format -i on them):$unformatted"
    format_failed=1
fi

status=0
echo "== release build, -Werror"
[ -f build-test/build.ninja ] || meson setup build-test -Dwerror=true
ninja -C build-test
meson test -C build-test --suite unit --suite slow --print-errorlogs --num-processes 2 || status=1

echo "== ASan+UBSan build, -Werror"
[ -f build-asan/build.ninja ] || meson setup build-asan -Dwerror=true -Db_sanitize=address,undefined \
    -Db_lundef=false -Dbuildtype=debugoptimized
ninja -C build-asan
UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1 \
    meson test -C build-asan --suite unit --print-errorlogs --num-processes 2 || status=1

echo "== ThreadSanitizer build"
[ -f build-tsan/build.ninja ] || meson setup build-tsan -Dwerror=true -Db_sanitize=thread \
    -Db_lundef=false -Dbuildtype=debugoptimized
ninja -C build-tsan
TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
    meson test -C build-tsan --suite threads --print-errorlogs --num-processes 2 || status=1

echo "== fuzz smoke, 30 s per target"
fuzz_status=0
sh scripts/fuzz.sh -t 30 || fuzz_status=$?
case "$fuzz_status" in
0 | 77) ;;
*) status=1 ;;
esac

# One closing line over all builds, counted from meson's test logs, and the
# fuzz targets from scripts/fuzz.sh's summary (a failure with no summary
# line, e.g. a broken script, still counts as one failure).
python3 - build-test/meson-logs/testlog.json build-asan/meson-logs/testlog.json \
    build-tsan/meson-logs/testlog.json "$format_failed" "$fuzz_status" build-fuzz/summary.txt <<'PY'
import json, os, sys
passed = failed = skipped = 0
for path in sys.argv[1:4]:
    for line in open(path):
        result = json.loads(line)["result"]
        if result in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif result == "SKIP":
            skipped += 1
        else:
            failed += 1
if sys.argv[4] == "1":
    failed += 1
else:
    passed += 1
fuzz_status, fuzz_summary = int(sys.argv[5]), sys.argv[6]
fuzz_results = []
if fuzz_status != 77 and os.path.exists(fuzz_summary):
    fuzz_results = [line.split()[1] for line in open(fuzz_summary) if line.strip()]
if fuzz_status == 77:
    skipped += 1
elif not fuzz_results or (fuzz_status != 0 and "fail" not in fuzz_results):
    failed += 1
passed += fuzz_results.count("ok")
failed += fuzz_results.count("fail")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
[ "$format_failed" -eq 0 ] || status=1
exit $status
