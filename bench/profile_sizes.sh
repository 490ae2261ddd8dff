#!/bin/sh
# How well one profile predicts a step at other micro-batch counts
# (docs/planner.md, "Other micro-batch sizes were the profile's weak point").
# One `brigade profile` at PROFILE_M micro-batches (its layers timed at
# ceil(B / PROFILE_M) samples and at SIZES, by default profile's own: 1, B
# and sizes between), then for
# each M in MS the step of a 2-device pipeline on the same split:
#   measured   a `brigade sweep` run, STEPS timed steps after 2 warm-up
#              steps, the mean step
#   sizes      simulated with that profile (each layer op on the line
#              between the two timed sizes around it)
#   one size   simulated with the same profile less its other sizes' times
#              (each op in proportion to the samples, as profiles were
#              priced before they had other sizes)
#   analytic   simulated without a profile (FLOPs at an assumed speed)
# and each prediction's error against the measured step; last, per
# column, the mean of the errors' sizes. Measured steps move with the
# machine's load (printed before and after): read the errors of one run
# to ten percent or so.
#
#   [MODEL=examples/fashion_cnn.model SPLIT=4 PROFILE_M=4 SIZES=1,4,64
#    MS="1 2 4 8 16 32 64" STEPS=10 BATCH=64] bench/profile_sizes.sh [BUILD_DIR]
set -eu
build=${1:-build}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
brigade="$build/cli/brigade"
model=${MODEL:-examples/fashion_cnn.model}
split=${SPLIT:-4}
profile_m=${PROFILE_M:-4}
ms=$(echo "${MS:-1 2 4 8 16 32 64}" | tr ' ' ',')
steps=${STEPS:-10}
batch=${BATCH:-64}
sizes=${SIZES:-}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
placement="--devices cpu:2 --split $split --batch $batch"
# shellcheck disable=SC2086 # the placement is meant to split
"$brigade" profile "$model" $placement --microbatches "$profile_m" ${sizes:+--sizes "$sizes"} \
    -o "$T/sizes.json" \
    >"$T/profile.txt" 2>&1 || { cat "$T/profile.txt"; exit 1; }
python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
p.pop('other_sizes', None)
for layer in p['layers']:
    layer.pop('at_other_sizes', None)
json.dump(p, open(sys.argv[2], 'w'))" "$T/sizes.json" "$T/one.json"
for run in measured sizes one analytic; do
    case $run in
    measured) extra="--steps $steps" ;;
    analytic) extra="--simulate" ;;
    *) extra="--simulate --profile $T/$run.json" ;;
    esac
    # shellcheck disable=SC2086 # the options are meant to split
    "$brigade" sweep "$model" $placement --microbatches "$ms" $extra --metrics "$T/$run.sweep.json" \
        >"$T/$run.txt" 2>&1 || { cat "$T/$run.txt"; exit 1; }
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$model, split $split, batch $batch, cpu:2; profiled at M=$profile_m, layers also at" \
    "$(python3 -c "import json, sys
print(','.join(str(n) for n in json.load(open(sys.argv[1])).get('other_sizes', [])) or 'none')" \
        "$T/sizes.json")"
python3 -c "import json, sys
runs = ['measured', 'sizes', 'one', 'analytic']
steps = {}
for run in runs:
    m = json.load(open(sys.argv[1] + '/' + run + '.sweep.json'))
    steps[run] = {p['microbatches']: p['timeline']['step_s'] * 1e3
                  for p in m['points'] if 'timeline' in p}
print('%4s %12s %20s %20s %20s' % ('M', 'measured ms', 'sizes ms (err)', 'one size ms (err)',
                                    'analytic ms (err)'))
errors = {run: [] for run in runs[1:]}
for m in sorted(steps['measured']):
    measured = steps['measured'][m]
    cells = []
    for run in runs[1:]:
        predicted = steps[run].get(m)
        if predicted is None:
            cells.append('%20s' % '-')
            continue
        error = 100 * (predicted - measured) / measured
        errors[run].append(abs(error))
        cells.append('%11.2f (%+5.0f%%)' % (predicted, error))
    print('%4d %12.2f %s' % (m, measured, ' '.join(cells)))
print('%4s %12s %s' % ('', 'mean |err|', ' '.join(
    '%19.0f%%' % (sum(e) / len(e)) if e else '%20s' % '-' for e in errors.values())))" "$T"
