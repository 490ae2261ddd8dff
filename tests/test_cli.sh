#!/bin/sh
# Tests of the brigade command line: exit statuses (0 ok, 1 failure while
# running, 2 bad usage or bad input), the messages that name what is wrong,
# and a short real training run with its metrics and checkpoint.
#
# usage: test_cli.sh PATH/TO/brigade
# Runs from any directory; examples/ is found through $BRIGADE_SOURCE_ROOT
# (set by meson) or else next to this script.

TEST_NAME=cli
. "$(dirname "$0")/cli_harness.sh"

# --- usage -----------------------------------------------------------------

usage_error "usage: brigade" --
expect 0 "" -- --help
stdout_has "train" "brigade --help"
stdout_has "summary" "brigade --help"
usage_error "unknown command 'frobnicate'" -- frobnicate
check "a command near none: the usage follows" grep -qF "usage: brigade COMMAND" "$ERR"
# A misspelt command: the one it most likely is, alone (the usage would
# bury it).
usage_error "unknown command 'trian' (did you mean train?)" -- trian "$MODEL"
check "a guessed command: no usage after it" sh -c "! grep -q 'usage: brigade' '$ERR'"
usage_error "unknown command 'simulat' (did you mean simulate?)" -- simulat "$MODEL"
usage_error "unknown command 'version' (brigade --version prints it)" -- version
# And --help, --version and help's command misspelt (a new user's).
usage_error "unknown command '--hlep' (did you mean --help?)" -- --hlep
usage_error "unknown command '-help' (did you mean --help?)" -- -help
usage_error "no command 'trian' to explain (did you mean train?)" -- help trian
check "help's guessed command: no usage after it" sh -c "! grep -q 'usage: brigade' '$ERR'"
# The version, from meson.build's project(); help COMMAND is COMMAND --help.
expect 0 "" -- --version
version=$(sed -n "s/^ *version : '\([^']*\)',\$/\1/p" "$ROOT/meson.build")
stdout_has "brigade $version (CUDA backend " "brigade --version"
usage_error "brigade: --version takes nothing after it, got 'extra'" -- --version extra
expect 0 "" -- help train
stdout_has "usage: brigade train MODEL" "brigade help train"
usage_error "brigade: no command 'frobnicate' to explain" -- help frobnicate
usage_error "brigade: help explains one command, not 2" -- help train plan
expect 0 "" -- --help plan
stdout_has "usage: brigade plan MODEL" "brigade --help plan"
expect 0 "" -- topo --topology "$ROOT/tests/fixtures/two-socket-8-core.xml"
stdout_has "2 packages, 2 NUMA nodes" "brigade topo --topology"
check "topo --topology: no note of this machine's memory" sh -c "! grep -q 'the system reports' '$OUT'"
stdout_has "  cpu:0         X     NODE     NODE     NODE      SYS" "topo link matrix"
# This machine: where its NUMA nodes report other than the system's total
# by more than 5% (a container, a virtual machine), a note gives the total,
# what plan shares among CPU devices; else none.
if [ -r /proc/meminfo ]; then
    expect 0 "" -- topo
    check "topo: the system's memory noted where the NUMA nodes differ" python3 -c '
import re, sys
out = open(sys.argv[1]).read()
nodes = float(re.search(r"NUMA nodes? \(([0-9.]+) GiB\)", out).group(1))
host = int(re.search(r"MemTotal: +([0-9]+) kB", open("/proc/meminfo").read()).group(1)) / 2**20
note = re.search(r"the system reports ([0-9.]+) GiB in all", out)
if abs(host - nodes) > 0.05 * host + 0.05:
    assert note and abs(float(note.group(1)) - host) < 0.06, (out, host)
elif abs(host - nodes) < 0.05 * host - 0.05:
    assert note is None, (out, host)' "$OUT"
fi
usage_error "$T/missing.xml: not a readable hwloc XML topology (No such file or directory)" -- \
    topo --topology "$T/missing.xml"
printf 'not xml\n' >"$T/notxml.xml"
# hwloc's own XML reader says nothing of where a file is malformed: libxml2
# says it (until 2026-12-05 the message ended at "topology"). A file hwloc
# refuses for what it holds gets hwloc's words, once (hwloc prints some
# itself: not a second time).
usage_error "$T/notxml.xml: not a readable hwloc XML topology (line 1, column 1: start tag expected, '<' not found)" \
    -- topo --topology "$T/notxml.xml"
printf '<?xml version="1.0"?>\n<topology version="2.0">\n  <object type="Machine" os_index="0">\n' \
    >"$T/cut.xml"
usage_error "$T/cut.xml: not a readable hwloc XML topology (line 4, column 1: premature end of data in tag object line 3)" \
    -- topo --topology "$T/cut.xml"
sed 's/<topology version="2.0">/<topology version="9.0">/' \
    "$ROOT/tests/fixtures/two-socket-8-core.xml" >"$T/version9.xml"
usage_error "$T/version9.xml: not a readable hwloc XML topology (hwloc: cannot import XML version 9.0 > 2)" \
    -- plan "$MODEL" --topology "$T/version9.xml"
check "hwloc's words said once" test "$(wc -l <"$ERR")" -eq 1
# Well-formed XML that is no topology, which hwloc refuses without a word:
# what one should be.
printf '<foo/>\n' >"$T/foo.xml"
usage_error "$T/foo.xml: not a readable hwloc XML topology (hwloc gave no reason; a topology is what 'lstopo FILE.xml' writes: a root element <topology> holding the machine's objects)" \
    -- plan "$MODEL" --topology "$T/foo.xml"
# xmlfile_refused GREP_OPTIONS FILE 'stderr' WHAT: `topo` with HWLOC_XMLFILE
# naming FILE, which hwloc reads for this machine: exit 2, and stderr as
# grep GREP_OPTIONS (-qF a part, -qFx a whole line) finds it.
xmlfile_refused() {
    HWLOC_XMLFILE="$2" "$BRIGADE" topo </dev/null >"$OUT" 2>"$ERR"
    status=$?
    check "$4: exit status 2 (was $status)" test "$status" -eq 2
    check "$4: the message" grep "$1" -- "$3" "$ERR"
}
xmlfile_refused -qFx "$T/version9.xml" \
    "brigade topo: HWLOC_XMLFILE=$T/version9.xml: not a readable hwloc XML topology (hwloc: cannot import XML version 9.0 > 2) (hwloc reads it for this machine; unset it)" \
    "HWLOC_XMLFILE refused: hwloc's words, by the file's base name too"
# The file HWLOC_XMLFILE names is an input: no output may replace it
# (a tester's --trace did, and the next run could not read the machine).
cp "$ROOT/tests/fixtures/two-socket-8-core.xml" "$T/env-topology.json"
for args in "train --data synthetic --steps 1" "simulate --steps 1"; do
    # shellcheck disable=SC2086 # the command and its options, split on purpose
    set -- $args
    cmd=$1
    shift
    HWLOC_XMLFILE="$T/env-topology.json" "$BRIGADE" "$cmd" "$MODEL" "$@" \
        --trace "$T/env-topology.json" </dev/null >"$OUT" 2>"$ERR"
    status=$?
    check "$cmd --trace over HWLOC_XMLFILE's file: exit status 2 (was $status)" test "$status" -eq 2
    check "$cmd --trace over HWLOC_XMLFILE's file: the message" grep -qF -- \
        "--trace '$T/env-topology.json' is the file hwloc (HWLOC_XMLFILE) reads: writing it would destroy it" "$ERR"
done
check "HWLOC_XMLFILE's file kept" cmp -s "$ROOT/tests/fixtures/two-socket-8-core.xml" "$T/env-topology.json"
# ... and one not there yet, which hwloc would read once an output made it.
HWLOC_XMLFILE="$T/env-missing.json" "$BRIGADE" simulate "$MODEL" --metrics "$T/env-missing.json" \
    </dev/null >"$OUT" 2>"$ERR"
status=$?
check "simulate --metrics onto a missing HWLOC_XMLFILE: exit status 2 (was $status)" test "$status" -eq 2
check "simulate --metrics onto a missing HWLOC_XMLFILE: the message" grep -qF -- \
    "--metrics '$T/env-missing.json' is a name hwloc (HWLOC_XMLFILE) reads first where it is: writing it would put a file there for it to read" "$ERR"
check "simulate --metrics onto a missing HWLOC_XMLFILE: nothing written" test ! -e "$T/env-missing.json"
# hwloc reads a file whole: a device or a directory is refused before.
usage_error "/dev/zero: not a regular file" -- topo --topology /dev/zero
# A file lstopo would never write that crashes hwloc 2.9 as it loads it (a
# root with a cpuset and no complete_cpuset) is loaded first in a child
# process and refused: exit 2, not a crash.
printf '%s\n' '<?xml version="1.0"?>' '<topology version="2.0">' \
    '<object type="Machine" os_index="0" cpuset="0x1"><object type="Core" os_index="0"' \
    ' cpuset="0x1"><object type="PU" os_index="0" cpuset="0x1"/></object></object></topology>' \
    >"$T/no_complete.xml"
usage_error "$T/no_complete.xml: hwloc crashed reading it" -- topo --topology "$T/no_complete.xml"
usage_error "$T/no_complete.xml: hwloc crashed reading it" -- \
    plan "$MODEL" --topology "$T/no_complete.xml"
# The same with complete_cpuset is a file hwloc refuses, in its own words.
sed 's/<object type="Machine" os_index="0" cpuset="0x1"/& complete_cpuset="0x1"/' \
    "$T/no_complete.xml" >"$T/complete.xml"
usage_error "$T/complete.xml: not a readable hwloc XML topology" -- topo --topology "$T/complete.xml"
xmlfile_refused -qF "$T/no_complete.xml" "HWLOC_XMLFILE=$T/no_complete.xml: hwloc crashed reading it" \
    "HWLOC_XMLFILE crashing hwloc: the variable is named"
# HWLOC_XMLFILE's file is checked as --topology's (until 2026-12-06 a sparse
# file of 3 GiB was read whole by hwloc, and a negative NUMA memory summed).
truncate -s 3G "$T/huge-topology.xml"
xmlfile_refused -qFx "$T/huge-topology.xml" \
    "brigade topo: HWLOC_XMLFILE=$T/huge-topology.xml: 3221225472 bytes, more than the 1073741824 an hwloc XML topology may have" \
    "HWLOC_XMLFILE past 1 GiB: refused before hwloc reads it"
rm -f "$T/huge-topology.xml"
xmlfile_refused -qFx /dev/zero \
    "brigade topo: HWLOC_XMLFILE=/dev/zero: not a regular file (brigade reads a topology from an hwloc XML file, as lstopo --of xml writes it)" \
    "HWLOC_XMLFILE a device: refused before hwloc reads it without end"
sed '0,/local_memory="[0-9]*"/s//local_memory="-5"/' "$ROOT/tests/fixtures/two-socket-8-core.xml" \
    >"$T/negative-memory.xml"
xmlfile_refused -qF "$T/negative-memory.xml" \
    "brigade topo: HWLOC_XMLFILE=$T/negative-memory.xml: NUMA node 0: local_memory reads as 18446744073709551611 bytes" \
    "HWLOC_XMLFILE with a negative NUMA memory: refused"
# A pipe can be read once: it is not probed, and hwloc reads it as before.
mkfifo "$T/topology.fifo"
cat "$ROOT/tests/fixtures/two-socket-8-core.xml" >"$T/topology.fifo" &
HWLOC_XMLFILE="$T/topology.fifo" "$BRIGADE" topo >"$OUT" 2>"$ERR"
status=$?
wait
check "HWLOC_XMLFILE a pipe: read (exit status $status)" test "$status" -eq 0
stdout_has "2 packages, 2 NUMA nodes" "HWLOC_XMLFILE a pipe: its machine"
usage_error "$T: is a directory, not an hwloc XML topology" -- topo --topology "$T"
# One that is not there: hwloc reads this machine, said in a note (until
# 2026-12-05 said nowhere; not refused, as a cluster-wide cache file may be
# missing on some nodes).
HWLOC_XMLFILE="$T/nowhere.xml" "$BRIGADE" topo </dev/null >"$OUT" 2>"$ERR"
status=$?
check "HWLOC_XMLFILE not there: this machine (exit status $status)" test "$status" -eq 0
check "HWLOC_XMLFILE not there: said" grep -qxF \
    "note: HWLOC_XMLFILE=$T/nowhere.xml: No such file or directory, so hwloc reads this machine itself instead" \
    "$ERR"
stdout_has "this machine: " "HWLOC_XMLFILE not there: topo shows this machine"
# One that is there: hwloc takes it for another machine and binds nothing,
# which a run says (until 2026-12-06 its threads ran unbound, unsaid), and
# how to say it is this one; plan runs nothing and says nothing of it.
HWLOC_XMLFILE="$ROOT/tests/fixtures/two-socket-8-core.xml" "$BRIGADE" train "$MODEL" --data synthetic \
    --steps 1 --devices cpu:2 </dev/null >"$OUT" 2>"$ERR"
status=$?
check "HWLOC_XMLFILE there: train runs (exit status $status)" test "$status" -eq 0
check "HWLOC_XMLFILE there: train says its threads are unbound" grep -qxF \
    "note: hwloc read HWLOC_XMLFILE=$ROOT/tests/fixtures/two-socket-8-core.xml for this machine and takes it for another, so the worker threads run on no core of their own (unbound); HWLOC_THISSYSTEM=1 says the file is this machine's" \
    "$ERR"
HWLOC_THISSYSTEM=1 HWLOC_XMLFILE="$ROOT/tests/fixtures/two-socket-8-core.xml" "$BRIGADE" train \
    "$MODEL" --data synthetic --steps 1 --devices cpu:2 </dev/null >"$OUT" 2>"$ERR"
status=$?
check "HWLOC_THISSYSTEM=1: train runs (exit status $status)" test "$status" -eq 0
check "HWLOC_THISSYSTEM=1: no such note" sh -c "! grep -q 'run on no core' '$ERR'"
HWLOC_XMLFILE="$ROOT/tests/fixtures/two-socket-8-core.xml" "$BRIGADE" plan "$MODEL" --devices cpu:2 \
    </dev/null >"$OUT" 2>"$ERR"
check "HWLOC_XMLFILE there: plan says nothing of binding" sh -c "! grep -q 'run on no core' '$ERR'"
# This machine as the process may use it: under taskset, the cores it
# allows (until 2026-12-05 cpu:1 was bound to core 1 all the same).
if command -v taskset >/dev/null && taskset -c 0 true 2>/dev/null; then
    taskset -c 0 "$BRIGADE" plan "$MODEL" --devices cpu:2 </dev/null >"$OUT" 2>"$ERR"
    check "taskset -c 0: two devices share the one core allowed" grep -qF \
        "note: 2 CPU devices on 1 core (cpu:N runs on core N mod 1): 1 core runs two or more;" "$ERR"
    taskset -c 0 "$BRIGADE" topo </dev/null >"$OUT" 2>"$ERR"
    stdout_has "1 core, 1 hardware thread" "taskset -c 0: topo shows the core allowed"
fi
# An address-space limit: no hang at exit (OpenBLAS's exit handler joined
# a worker spinning for memory it could not map: --version hung under
# ulimit -v 150000 until 2026-12-05), and train says what may hang. Not
# for a sanitizer's build: its shadow memory alone is past any such limit.
if ! ldd "$BRIGADE" 2>/dev/null | grep -q 'lib[at]san'; then
    (
        # shellcheck disable=SC3045 # dash and bash both have ulimit -v
        ulimit -v 150000
        exec timeout 60 "$BRIGADE" --version
    ) </dev/null >"$OUT" 2>"$ERR"
    status=$?
    check "ulimit -v 150000: --version ends (exit status $status)" test "$status" -eq 0
    (
        # shellcheck disable=SC3045 # dash and bash both have ulimit -v
        ulimit -v 2000000
        exec timeout 120 "$BRIGADE" train "$MODEL" --data synthetic --steps 1 --batch 16 \
            --test-samples 16
    ) </dev/null >"$OUT" 2>"$ERR"
    status=$?
    check "ulimit -v 2000000: a short run ends (exit status $status)" test "$status" -eq 0
    check "ulimit -v: train notes what may hang" grep -qF \
        "note: ulimit -v holds this process to 1953 MiB of address space; OpenBLAS before its fix" \
        "$ERR"
fi
# Too few file descriptors for the save at the end: refused before
# training (until 2026-12-05 the check made the temporary file alone, one
# descriptor, and the final save, which holds two, failed after the run).
# Not for a sanitizer's build, whose runtime opens files of its own.
if ! ldd "$BRIGADE" 2>/dev/null | grep -q 'lib[at]san'; then
    for files in 4 5; do
        (
            # shellcheck disable=SC3045 # dash and bash both have ulimit -n
            ulimit -n $files
            exec "$BRIGADE" train "$MODEL" --data synthetic --steps 1 --batch 16 \
                --test-samples 16 --save "$T/files$files.st"
        ) </dev/null >"$OUT" 2>"$ERR"
        status=$?
        if [ $files = 4 ]; then
            check "ulimit -n 4: --save refused before training (exit status $status)" \
                test "$status" -eq 2
            check "ulimit -n 4: why" grep -qF "brigade train: --save: cannot write '$T/files4.st': writing it takes two file descriptors beside those open, and a second one cannot be had (Too many open files; ulimit -n is 4)" "$ERR"
            check "ulimit -n 4: nothing trained, nothing printed" test ! -s "$OUT"
            check "ulimit -n 4: no file, no temporary file" \
                sh -c "! ls '$T' | grep -q '^files4'"
        else
            check "ulimit -n 5: saved (exit status $status)" test "$status" -eq 0
            check "ulimit -n 5: the file" test -s "$T/files5.st"
        fi
    done
fi
# A machine with memory and no Core or PU object has nothing to run on
# (until 2026-12-05 it was shown as one core, and plans used it).
printf '%s\n' '<?xml version="1.0"?>' '<topology version="2.0">' \
    '<object type="Machine" os_index="0" cpuset="0x3" complete_cpuset="0x3" nodeset="0x1" complete_nodeset="0x1">' \
    '<object type="NUMANode" os_index="0" cpuset="0x3" complete_cpuset="0x3" nodeset="0x1" complete_nodeset="0x1" local_memory="1073741824"/>' \
    '</object></topology>' >"$T/no-cores.xml"
usage_error "$T/no-cores.xml: no cores: the topology has no Core or PU object to run a device on" -- \
    topo --topology "$T/no-cores.xml"
usage_error "$T/no-cores.xml: no cores" -- plan "$MODEL" --topology "$T/no-cores.xml"
xmlfile_refused -qF "$T/no-cores.xml" \
    "brigade topo: HWLOC_XMLFILE=$T/no-cores.xml: no cores: the topology has no Core or PU object" \
    "HWLOC_XMLFILE of no cores: the variable named"
# 17 cores and 17 GPUs: their link matrices are left out, and each omission
# is said (until 2026-12-05 the GPUs' was silent).
cat >"$T/make_gpus.py" <<'EOF2'
import sys
n = int(sys.argv[2])
sets = lambda mask: f'cpuset="{mask}" complete_cpuset="{mask}" nodeset="0x1" complete_nodeset="0x1"'
every = hex((1 << n) - 1)
cores = "".join(f'<object type="Core" os_index="{i}" {sets(hex(1 << i))}>'
                f'<object type="PU" os_index="{i}" {sets(hex(1 << i))}/></object>' for i in range(n))
gpus = "".join(f'<object type="Bridge" bridge_type="1-1" depth="1" bridge_pci="0000:[{i + 1:02x}-{i + 1:02x}]" '
               f'pci_busid="0000:00:{i + 1:02x}.0" pci_type="0604 [8086:347a] [0000:0000] 04">'
               f'<object type="PCIDev" pci_busid="0000:{i + 1:02x}:00.0" pci_type="0302 [10de:2335] [10de:18be] a1">'
               f'<object type="OSDev" name="cuda{i}" subtype="CUDA" osdev_type="5">'
               f'<info name="CUDAGlobalMemorySize" value="83886080"/></object></object></object>'
               for i in range(n))
open(sys.argv[1], "w").write(
    '<?xml version="1.0"?>\n<topology version="2.0">\n'
    f'<object type="Machine" os_index="0" {sets(every)}>'
    f'<object type="NUMANode" os_index="0" {sets(every)} local_memory="68719476736"/>{cores}'
    '<object type="Bridge" os_index="0" bridge_type="0-1" depth="0" bridge_pci="0000:[00-ff]">'
    f'{gpus}</object></object></topology>\n')
EOF2
python3 "$T/make_gpus.py" "$T/seventeen.xml" 17
expect 0 "" -- topo --topology "$T/seventeen.xml"
stdout_has "(17 cores: the link matrix is left out above 16)" "topo: a core matrix left out is said"
stdout_has "(17 GPUs: the link and NVLink matrices are left out above 16)" \
    "topo: a GPU matrix left out is said"
stdout_has " 16 0000:11:00.0   10de:2335        0        - cuda:16    80.0 GiB" \
    "topo: the 17th GPU is listed, in no package ('-', where it read -1)"
# A file without the NUMA nodes' memory: unknown, not 0.0 GiB.
sed 's/ local_memory="[0-9]*"//' "$ROOT/tests/fixtures/nvlink-bridged-pairs.xml" >"$T/no-memory.xml"
expect 0 "" -- topo --topology "$T/no-memory.xml"
stdout_has "1 package, 1 NUMA node (memory unknown), " "topo: the machine's memory unknown"
stdout_has "  NUMA node 0: memory unknown" "topo: a NUMA node's memory unknown"
# One node's memory unknown: the total says it covers the others.
sed '0,/ local_memory="[0-9]*"/s///' "$ROOT/tests/fixtures/two-socket-8-gpu.xml" >"$T/half-memory.xml"
expect 0 "" -- topo --topology "$T/half-memory.xml"
stdout_has "2 packages, 2 NUMA nodes (512.0 GiB where known), " "topo: a total of the nodes known"
stdout_has "  NUMA node 0: memory unknown" "topo: the node without memory"
stdout_has "  NUMA node 1: 512.0 GiB" "topo: the node with memory"
# 25 GPUs, cuda3 named cuda40: the names listed, cut with ", ..." where the
# message has no room (a cut once read cuda:17 as "cuda:1...").
python3 "$T/make_gpus.py" "$T/twenty-five.xml" 25
sed -i 's/name="cuda3"/name="cuda40"/' "$T/twenty-five.xml"
usage_error "cuda:3: the topology's 25 GPUs are cuda:0, cuda:1, cuda:2, cuda:40, cuda:4, cuda:5, cuda:6, cuda:7, cuda:8, cuda:9, cuda:10, cuda:11, cuda:12, cuda:13, cuda:14, cuda:15, cuda:16, cuda:17, ... as hwloc's CUDA devices name them; none is cuda:3" \
    -- plan "$MODEL" --topology "$T/twenty-five.xml" --devices cuda:3
# A topology whose first GPU is hidden from CUDA (CUDA_VISIBLE_DEVICES):
# hwloc names the other seven cuda0 to cuda6, and cuda:7 is none of them.
python3 - "$ROOT/tests/fixtures/two-socket-8-gpu.xml" "$T/hidden.xml" <<'EOF2'
import re, sys
s = open(sys.argv[1]).read()
s = re.sub(r'\s*<object type="OSDev" name="cuda0".*?</object>', '', s, flags=re.S)
for i in range(1, 8):
    s = s.replace('name="cuda%d"' % i, 'name="cudaY%d"' % (i - 1))
open(sys.argv[2], 'w').write(s.replace('cudaY', 'cuda'))
EOF2
usage_error "cuda:7: the topology names 7 of its 8 GPUs as CUDA devices (the others were hidden from CUDA), none of them 7" \
    -- plan "$MODEL" --topology "$T/hidden.xml" --devices cuda:6,cuda:7
expect 0 "" -- plan "$MODEL" --topology "$T/hidden.xml" --devices auto --stages 2
stdout_has "2 stages on cuda:" "plan --devices auto on a topology with a GPU hidden"
expect 0 "" -- plan "$MODEL" --topology "$T/hidden.xml" --devices auto --json
json_check "auto takes the seven GPUs CUDA can see" '
assert sorted(s["device"] for s in p["stages"]) == ["cuda:%d" % i for i in range(7)], p["stages"]'
usage_error "GPU 0 is listed twice in 'cuda:0,cuda:1,cuda:0' (for several stages on one GPU, write cuda:0x2)" \
    -- plan "$MODEL" --topology "$ROOT/tests/fixtures/two-socket-8-gpu.xml" \
    --devices cuda:0,cuda:1,cuda:0
# CUDA names with gaps (cuda5 renamed cuda9): the names, not "no GPU 5"
# of a file whose cuda:9 is there.
sed 's/name="cuda5"/name="cuda9"/' "$ROOT/tests/fixtures/two-socket-8-gpu.xml" >"$T/gaps.xml"
usage_error "cuda:5: the topology's 8 GPUs are cuda:0, cuda:1, cuda:2, cuda:3, cuda:4, cuda:9, cuda:6, cuda:7 as hwloc's CUDA devices name them; none is cuda:5 (see brigade topo --topology)" \
    -- plan "$MODEL" --topology "$T/gaps.xml" --devices cuda:5
expect 0 "" -- plan "$MODEL" --topology "$T/gaps.xml" --devices cuda:9
# A CUDA number past int's range is no CUDA number (not a wrapped one).
sed 's/name="cuda5"/name="cuda4294967301"/' "$ROOT/tests/fixtures/two-socket-8-gpu.xml" \
    >"$T/bignum.xml"
usage_error "GPU OS device 'cuda4294967301': not cudaN with N in 0..255" -- \
    topo --topology "$T/bignum.xml"
# Past --devices' range (cuda:0 to cuda:255) the file is named, not
# --devices (until 2026-12-05 plan blamed a cuda:300 no one had written).
sed 's/name="cuda1"/name="cuda300"/' "$ROOT/tests/fixtures/two-socket-8-gpu.xml" >"$T/big.xml"
usage_error "$T/big.xml: GPU OS device 'cuda300': not cudaN with N in 0..255" -- \
    plan "$MODEL" --topology "$T/big.xml" --devices cuda:0,cuda:2
# hwloc reads this machine from HWLOC_XMLFILE where it is set: named.
xmlfile_refused -qF "$MODEL" \
    "HWLOC_XMLFILE=$MODEL: not a readable hwloc XML topology (line 1, column 1: start tag expected, '<' not found) (hwloc reads it for this machine; unset it)" \
    "HWLOC_XMLFILE not XML: the variable is named"
usage_error "unknown option '--bogus'" -- topo --bogus
usage_error "unknown argument 'extra'" -- topo --topology \
    "$ROOT/tests/fixtures/two-socket-8-core.xml" extra
usage_error "--topology needs a value" -- topo --topology
expect 0 "" -- topo --topology "$ROOT/tests/fixtures/two-socket-8-gpu.xml"
stdout_has "   5 0000:93:00.0   10de:2335        1        1 cuda:5    140.0 GiB" "topo GPU table"
stdout_has "  gpu0       X    PIX    PHB    PHB    SYS    SYS    SYS    SYS" "topo GPU links"
check "topo: no NVLink, no table of its speeds" sh -c "! grep -q 'NVLink GB/s' '$OUT'"
expect 0 "" -- topo --topology "$ROOT/tests/fixtures/nvlink-bridged-pairs.xml"
stdout_has "  gpu1     NVL      X    PHB    PHB" "topo: NVLink bridges"
stdout_has "  gpu2       -      -      X  100.0" "topo: NVLink's GB/s"
# Every help text fits a terminal of 80 columns.
for cmd in "" summary train plan simulate sweep profile topo; do
    # shellcheck disable=SC2086 # the empty command is no argument
    expect 0 "" -- $cmd --help
    check "brigade $cmd --help fits 80 columns" awk 'length > 80 { exit 1 }' "$OUT"
done
expect 0 "" -- train --help
stdout_has "--batch" "brigade train --help"
expect 0 "" -- summary --help
expect 0 "" -- topo --help
stdout_has "the path in BRIGADE_CUDA_MODULE" "brigade topo --help says where the CUDA backend is found"

# --- summary ---------------------------------------------------------------

expect 0 "" -- summary "$MODEL"
stdout_has "693,962" "brigade summary"
stdout_has "softmax_cross_entropy" "brigade summary"
stdout_has "parameters: 693,962 (2.65 MiB fp32)" "summary: the weights' size"
stdout_has "    2  maxpool 2x2/2          32x13x13" "summary: a pool's output image"
stdout_has "    3  flatten                5408 " "summary: flatten's vector"
# A model past 1 GiB of weights says so in GiB (it said 1026.75 MiB).
printf 'input channels=4096 height=1 width=1\ndense units=65536\ndense units=10\nsoftmax_cross_entropy\n' \
    >"$T/gib.model"
expect 0 "" -- summary "$T/gib.model"
stdout_has "parameters: 269,156,362 (1.00 GiB fp32)" "summary: weights in GiB"
# Past 1024 PiB in EiB (it said 4092.00 PiB).
printf 'input channels=1048576 height=1 width=1\nconv2d filters=1048576 kernel=1023 padding=same\nflatten\nsoftmax_cross_entropy\n' \
    >"$T/eib.model"
expect 0 "" -- summary "$T/eib.model"
stdout_has "parameters: 1,150,670,804,305,838,080 (3.99 EiB fp32)" "summary: weights in EiB"
# A convolution's 1x1 output is still an image (a dense layer after it needs
# flatten), so it reads CxHxW; flatten's vector reads as its length.
printf 'input channels=3 height=1 width=1\nconv2d filters=4 kernel=1\nrelu\nflatten\ndense units=2\nsoftmax_cross_entropy\n' >"$T/one_pixel.model"
expect 0 "" -- summary "$T/one_pixel.model"
stdout_has "input 3x1x1, 2 classes" "summary: a 1x1 input"
stdout_has "    0  conv2d 1x1/1 pad 0     4x1x1 " "summary: a 1x1 convolution output"
stdout_has "    1  relu                   4x1x1 " "summary: relu keeps the image"
stdout_has "    2  flatten                4 " "summary: flatten of a 1x1 image"
# Before a dense layer, the same input is a vector, and so is a layernorm's
# output on it (its weights are (3) in a checkpoint, as nn.LayerNorm(3)'s).
printf 'input channels=3 height=1 width=1\nlayernorm\ndense units=2\nsoftmax_cross_entropy\n' \
    >"$T/one_pixel_vector.model"
expect 0 "" -- summary "$T/one_pixel_vector.model"
stdout_has "    0  layernorm              3 " "summary: a layernorm on a 1x1 input taken as a vector"
# --json: the table's figures for scripts (a tester's wish), exact at any
# size, the layers adding up to the totals.
if expect 0 "" -- summary "$MODEL" --json; then
    check "summary --json: the origin CNN's layers and totals" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
assert p["input"] == [1, 28, 28] and p["classes"] == 10, p
layers = p["layers"]
assert [l["kind"] for l in layers] == ["conv2d", "relu", "maxpool", "flatten", "dense", "relu",
                                       "dense", "softmax_cross_entropy"], layers
assert [l["index"] for l in layers] == list(range(8)), layers
assert layers[0]["text"] == "conv2d 3x3/1 pad 0" and layers[0]["params"] == 320, layers[0]
assert layers[2]["output"] == [32, 13, 13] and layers[3]["output"] == [5408], layers
assert p["total_params"] == 693962 == sum(l["params"] for l in layers), p
assert p["total_flops"] == sum(l["flops"] for l in layers), p
assert p["total_activation_bytes"] == sum(l["activation_bytes"] for l in layers), p' "$OUT"
fi
if expect 0 "" -- summary "$T/eib.model" --json; then
    check "summary --json: 3.99 EiB of weights to the parameter" python3 -c '
import json, sys
assert json.load(open(sys.argv[1]))["total_params"] == 1150670804305838080' "$OUT"
fi
usage_error "--json given twice" -- summary "$MODEL" --json --json
usage_error "unknown option '--jsn' (did you mean --json?)" -- summary "$MODEL" --jsn
# The smooth activations and layernorm: rows of their own, one FLOP per
# element (layernorm 7, and 2 weights); the example trains on two stages,
# and a misspelt activation lists the choices.
FASHION_MLP=$ROOT/examples/fashion_mlp.model
expect 0 "" -- summary "$FASHION_MLP"
stdout_has "    2  gelu                   256                     0            256" \
    "summary: gelu after its dense layer"
stdout_has "    3  layernorm              256                   512          1,792" \
    "summary: layernorm's gamma and beta"
stdout_has "    5  tanh                   128                     0            128" \
    "summary: tanh after its dense layer"
stdout_has "parameters: 235,658" "summary: the MLP's weights"
expect 0 "" -- train "$FASHION_MLP" --data synthetic --devices cpu:2 \
    --microbatches 4 --steps 8 --batch 32 --split 3 --save "$T/mlp.safetensors"
stdout_has "test accuracy" "train: the MLP on two stages, the second starting with its layernorm"
saved_score=$(grep '^test accuracy' "$OUT")
expect 0 "" -- train "$FASHION_MLP" --data synthetic --steps 0 --batch 32 \
    --load "$T/mlp.safetensors"
stdout_has "$saved_score" "train: the MLP's weights, layernorm's included, load and score alike"
printf '%s\nconv2d filters=2 kernel=3 activation=sigmoid\nflatten\ndense units=4 activation=swish\nsoftmax_cross_entropy\n' \
    'input channels=1 height=5 width=5' >"$T/swish.model"
usage_error "$T/swish.model:4:26: activation=swish: expected relu, tanh, sigmoid, gelu, none or linear" \
    -- summary "$T/swish.model"
# dropout: its rate in summary; trained and saved at one rate, --resume at
# another is refused (another step), --load takes the weights with a note.
printf '%s\nconv2d filters=2 kernel=3\ndropout rate=0.25\nflatten\ndense units=4\ndropout\ndense units=3\nsoftmax_cross_entropy\n' \
    'input channels=1 height=5 width=5' >"$T/dropout.model"
expect 0 "" -- summary "$T/dropout.model"
stdout_has "    1  dropout 0.25           2x3x3                   0             18" \
    "summary: a dropout's rate"
stdout_has "    4  dropout 0.5            4 " "summary: dropout's default rate"
sed 's/rate=0.25/rate=0.123456789/' "$T/dropout.model" >"$T/dropout_digits.model"
expect 0 "" -- summary "$T/dropout_digits.model"
stdout_has "    1  dropout 0.123456789    2x3x3 " "summary: a rate as written, not %g's 0.123457"
# A rate of many zeros in %g's form, with its digits, not cut to 0.0000...
sed 's/rate=0.25/rate=0.0000000000000000000000000000000000000000000000000000123/' \
    "$T/dropout.model" >"$T/dropout_tiny.model"
expect 0 "" -- summary "$T/dropout_tiny.model"
stdout_has "    1  dropout 1.23e-53       2x3x3 " "summary: a tiny rate as 1.23e-53"
expect 0 "" -- train "$T/dropout.model" --data synthetic --devices cpu:2 --microbatches 2 \
    --steps 3 --batch 8 --save "$T/dropout.safetensors"
sed 's/rate=0.25/rate=0.3/' "$T/dropout.model" >"$T/dropout30.model"
usage_error "checkpoint belongs to another model" -- train "$T/dropout30.model" \
    --data synthetic --steps 4 --batch 8 --resume "$T/dropout.safetensors"
check "train: --resume of another model says which layer differs" \
    grep -qF "; its layer 1 is 'dropout rate=0.25' where this model has 'dropout rate=0.3')" "$ERR"
expect 0 "" -- train "$T/dropout30.model" --data synthetic --steps 0 --batch 8 \
    --load "$T/dropout.safetensors"
check "train: --load at another dropout rate notes the other fingerprint and the layer" \
    grep -qF "; its layer 1 is 'dropout rate=0.25' where this model has 'dropout rate=0.3'); its tensors have" "$ERR"
sed 's/rate=0.25/rate=1/' "$T/dropout.model" >"$T/dropout100.model"
usage_error "$T/dropout100.model:3:14: rate=1 is out of range: a rate of 1 or more would drop every value; expected 0 to 0.999999" \
    -- summary "$T/dropout100.model"
# residual blocks: summary indents each block and names its ends; a
# --split inside a block is refused naming the block and where to cut;
# the planner's stages hold whole blocks; too many stages for the places
# to cut is refused; a 3-stage run trains.
printf '%s\n' 'input channels=1 height=6 width=6' 'conv2d filters=2 kernel=3 padding=same' \
    residual 'conv2d filters=2 kernel=3 padding=same activation=relu' add flatten \
    'dense units=8' residual 'dense units=8 activation=relu' residual 'dense units=8' add add \
    'dense units=3' softmax_cross_entropy >"$T/residual.model"
expect 0 "" -- summary "$T/residual.model"
stdout_has "    1  residual (to 4)        2x6x6                   0              0" \
    "summary: a block's residual"
stdout_has "    2    conv2d 3x3/1 pad 1   2x6x6 " "summary: a block's layer indented"
stdout_has "   11      dense              8 " "summary: a nested block's layer"
stdout_has "   13  add (from 7)           8                       0              8" \
    "summary: an add, a FLOP a value"
usage_error "--split: stage 1 would start at layer 9, inside the residual block of layers 7..13 (lines 8..13), whose add needs the block's input on the same stage; start it at layer 7 or 14" \
    -- train "$T/residual.model" --data synthetic --stages 2 --split 9
expect 0 "" -- plan "$T/residual.model" --stages 6 --json
json_check "plan: 6 stages, each of whole blocks" "
assert [s['layers'] for s in p['stages']] == [[0, 1, 2, 3, 4], [5], [6], [7, 8, 9, 10, 11, 12, 13], [14], [15]], p['stages']"
usage_error "8 stages but the model has only 7 places to start one, layers 0, 1, 5, 6, 7, 14 and 15: a stage may not start inside a residual block" \
    -- plan "$T/residual.model" --stages 8
# A block too large for any stage: the advice names the block, which no
# number of devices can split.
{
    echo 'input channels=64 height=1 width=1'
    echo 'dense units=64'
    echo residual
    for _ in 1 2 3 4; do echo 'dense units=1024 activation=relu'; done
    echo 'dense units=64'
    echo add
    echo 'dense units=4'
    echo softmax_cross_entropy
} >"$T/big_block.model"
expect 2 "the residual block of layers 1..11 (which a stage holds whole) needs at least" \
    -- plan "$T/big_block.model" --devices cpu:2 --device-mem 12M
# A shortcut branch: its output is the block's input again, an image here.
printf '%s\n' 'input channels=2 height=6 width=6' residual \
    'conv2d filters=4 kernel=3 stride=2 padding=same' shortcut 'conv2d filters=4 kernel=1 stride=2' \
    add flatten 'dense units=3' softmax_cross_entropy >"$T/shortcut.model"
sed 's/^add$/shortcut\nadd/' "$T/shortcut.model" >"$T/shortcut_twice.model"
expect 0 "" -- summary "$T/shortcut.model"
stdout_has "    2  shortcut (of 0)        2x6x6                   0              0" \
    "summary: a shortcut, the block's input again"
stdout_has "    3    conv2d 1x1/2 pad 0   4x3x3 " "summary: the shortcut branch indented"
usage_error "shortcut_twice.model:6:1: a second 'shortcut' in the residual block opened at line 2 (the first at line 4)" \
    -- summary "$T/shortcut_twice.model"
expect 0 "" -- train "$T/residual.model" --data synthetic --stages 3 --microbatches 2 \
    --steps 3 --batch 8 --schedule zb-h1 --save "$T/residual.safetensors"
# One more block in front renumbers every layer after it: --load says why.
sed '1a residual\nrelu\nadd' "$T/residual.model" >"$T/residual_more.model"
usage_error "residual, shortcut and add layers take numbers too, so a block added or removed renames the layers after it" \
    -- train "$T/residual_more.model" --data synthetic --steps 0 --load "$T/residual.safetensors"
usage_error "no MODEL" -- summary
usage_error "unknown option '--bogus'" -- summary --bogus "$MODEL"
usage_error "unknown option '--' (brigade reads no end-of-options marker; a file whose name starts with - can be written ./-NAME)" \
    -- summary -- "$MODEL"
usage_error "more than one MODEL" -- summary "$MODEL" "$MODEL"
# A model file that cannot be read is bad input (2), naming the path.
usage_error "cannot read '$T/missing.model': No such file or directory" -- \
    summary "$T/missing.model"
usage_error "cannot read '$T': Is a directory" -- summary "$T"

# Malformed specs: exit 2 with "FILE:LINE:COL: message".
spec_head='input channels=1 height=28 width=28'
printf '%s\nconv2d filters=4 kernel=3\nfoo units=3\nsoftmax_cross_entropy\n' "$spec_head" \
    >"$T/unknown.model"
usage_error "$T/unknown.model:3:1: unknown layer 'foo'" -- summary "$T/unknown.model"

printf '%s\ndense units=abc\nsoftmax_cross_entropy\n' "$spec_head" >"$T/badvalue.model"
usage_error "$T/badvalue.model:2:13:" -- summary "$T/badvalue.model"
check "bad value message names the value" grep -qF "units=abc" "$ERR"

printf '%s\ndense units=10 color=red\nsoftmax_cross_entropy\n' "$spec_head" >"$T/badkey.model"
usage_error "$T/badkey.model:2:16:" -- summary "$T/badkey.model"

: >"$T/empty.model"
usage_error "$T/empty.model:1:1:" -- summary "$T/empty.model"

printf 'input channels=1\000\001\002 height=28\n\377\376binary\n' >"$T/binary.model"
usage_error "$T/binary.model:1:17:" -- summary "$T/binary.model"

{
    printf '%s #' "$spec_head"
    i=0
    while [ $i -lt 50 ]; do
        printf '%s' 'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'
        i=$((i + 1))
    done
    printf '\ndense units=10\nsoftmax_cross_entropy\n'
} >"$T/longline.model"
usage_error "$T/longline.model:1:" -- summary "$T/longline.model"
check "a 5000-byte line does not flood stderr" test "$(wc -c <"$ERR")" -lt 1000

printf '%s\ndense units=10\n' "$spec_head" >"$T/noloss.model"
usage_error "$T/noloss.model:" -- summary "$T/noloss.model"

# --- train: usage errors -----------------------------------------------------

usage_error "no MODEL given" -- train
usage_error "no MODEL given" -- train --steps 1
usage_error "unknown option '--bogus'" -- train "$MODEL" --bogus 3
usage_error "unknown option '--bogus'" -- train "$MODEL" --bogus
check "--bogus is near no option: no guess" sh -c "! grep -q 'did you mean' '$ERR'"
# A misspelt option: the one it most likely is (a new user's --step), by
# its beginning or within an edit or two (a swap counts one), among the
# command's own and the placement's; none where two are as near.
usage_error "unknown option '--step' (did you mean --steps?)" -- train "$MODEL" --step 5
usage_error "unknown option '--mircobatches' (did you mean --microbatches?)" -- \
    plan "$MODEL" --mircobatches 4
usage_error "unknown option '--lr-shedule' (did you mean --lr-schedule?)" -- \
    train "$MODEL" --lr-shedule cosine
usage_error "unknown option '--sa'" -- train "$MODEL" --sa 1
check "--sa begins --save and --save-every: no guess" sh -c "! grep -q 'did you mean' '$ERR'"
# A reviewer's: the nearest by edits before the only one begun (--device
# begins --device-mem too); flags and --help weighed as well; a name both
# the command and the placement list counted once (sweep's --schedule).
usage_error "unknown option '--device' (did you mean --devices?)" -- train "$MODEL" --device cpu:2
usage_error "unknown option '--tf23' (did you mean --tf32?)" -- train "$MODEL" --tf23
usage_error "unknown option '--jsn' (did you mean --json?)" -- plan "$MODEL" --jsn
usage_error "unknown option '--shedule' (did you mean --schedule?)" -- \
    sweep "$MODEL" --shedule 1f1b --simulate
usage_error "unknown option '--hlep' (did you mean --help?)" -- simulate "$MODEL" --hlep
# A flag given a value: it takes none (it was guessed as itself).
usage_error "unknown option '--recompute=1' (--recompute takes no value)" -- \
    train "$MODEL" --recompute=1
usage_error "more than one MODEL given ('$MODEL', '$MODEL')" -- train "$MODEL" "$MODEL"
usage_error "more than one MODEL given ('$MODEL', 'M'); 'M' is no file: the end of an option's value, written with a space?" \
    -- plan "$MODEL" --device-mem 512 M
usage_error "more than one MODEL given ('M', '$MODEL'); 'M' is no file: the end of an option's value, written with a space?" \
    -- plan --device-mem 512 M "$MODEL"
usage_error "more than one MODEL given ('$MODEL', 'x')" -- summary "$MODEL" x
check "summary has no option values: no hint" sh -c "! grep -q 'no file' '$ERR'"
# Whole messages: a bare option name would also match "unknown option".
usage_error "--batch: 0 is outside 1..1048576" -- train "$MODEL" --batch 0
usage_error "--batch: expected an integer, got 'abc'" -- train "$MODEL" --batch abc
usage_error "--batch: expected an integer, got '12x'" -- train "$MODEL" --batch 12x
usage_error "--batch: expected an integer, got ' 12'" -- train "$MODEL" --batch " 12"
usage_error "--batch: expected an integer, got '+12'" -- train "$MODEL" --batch +12
usage_error "--batch: 99999999999999999999 is outside 1.." -- train "$MODEL" \
    --batch 99999999999999999999
usage_error "--lr: -1 is outside 0..1e+06" -- train "$MODEL" --lr -1
usage_error "--lr: expected a number, got 'nan'" -- train "$MODEL" --lr nan
usage_error "--lr: expected a number, got '0x10'" -- train "$MODEL" --lr 0x10
# A leading space is refused, as the integer options refuse it; a number
# past a double is out of range, not "not a number".
usage_error "--lr: expected a number, got ' 3'" -- train "$MODEL" --lr ' 3'
usage_error "--lr: 1e309 is outside 0..1e+06" -- train "$MODEL" --lr 1e309
usage_error "--lr: expected a number, got '+0.1'" -- train "$MODEL" --lr +0.1
usage_error "--lr: 1e-400 is nearer 0 than a double holds (about 4.9e-324); write 0 for none" \
    -- train "$MODEL" --lr 1e-400
usage_error "--stall-timeout: 4294967297 is outside 0..1e+09" -- train "$MODEL" \
    --stall-timeout 4294967297
# A folder named like a --data keyword is not read by that name, and a
# note says so (until 2026-12-04, silently).
mkdir -p "$T/keywords/synthetic"
here=$(pwd)
cd "$T/keywords" || exit 1
expect 0 "note: --data synthetic reads generated data, not the folder 'synthetic' here (--data ./synthetic reads that)" \
    -- train "$MODEL" --data synthetic --steps 1 --batch 16
# A measured sweep's default, said to be one.
expect 0 "note: the default --data synthetic reads generated data, not the folder 'synthetic'" \
    -- sweep "$MODEL" --microbatches 1 --steps 1 --warmup 0 --batch 16
cd "$here" || exit 1
expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 16
check "no folder, no note" sh -c "! grep -q 'note: --data' '$ERR'"
# -0 is 0 (until 2026-12-04 shown as "adam lr -0", and so in --metrics).
expect 0 "batch 16, adam lr 0" -- train "$MODEL" --data synthetic --steps 1 --batch 16 --lr -0
check "--lr -0 is shown as 0" sh -c "! grep -q 'lr -0' '$ERR'"
# A model whose parameters the host cannot hold: said so, with the count.
printf 'input channels=3 height=4 width=4\nconv2d filters=2 kernel=1048575 padding=same\nflatten\ndense units=10\nsoftmax_cross_entropy\n' >"$T/huge.model"
expect 1 "$T/huge.model: out of host memory for the model's " -- train "$T/huge.model" \
    --data synthetic --steps 1
usage_error "--optimizer: unknown optimizer 'foo' (expected sgd or adam)" -- train "$MODEL" --optimizer foo
usage_error "--epochs needs a value" -- train "$MODEL" --epochs
usage_error "--epochs: -1 is outside 1..1000000" -- train "$MODEL" --epochs -1
# Not "as many as --steps takes", which is what --steps alone means.
usage_error "--epochs: 0 is outside 1..1000000" -- train "$MODEL" --epochs 0 --steps 3
usage_error "--steps: -1 is outside 0..4611686018427387903" -- train "$MODEL" --steps -1
usage_error "--momentum: 2 is outside 0..1" -- train "$MODEL" --momentum 2
# Momentum is SGD's: with Adam (the default) it would be ignored.
usage_error "--momentum is an SGD setting; this run uses --optimizer adam" -- \
    train "$MODEL" --momentum 0.9 --steps 1
usage_error "--momentum is an SGD setting; this run uses --optimizer adam" -- \
    plan "$MODEL" --momentum 0.9
# Even 0, which Adam would ignore as silently.
for cmd in train simulate profile; do
    usage_error "--momentum is an SGD setting; this run uses --optimizer adam" -- \
        "$cmd" "$MODEL" --optimizer adam --momentum 0
done
# Learning-rate schedules: the header says which, the progress gives the
# rate (cosine from 0.001 after 4 warmup steps to 0.0001 at step 16: the
# last step's 0.0001 + 0.0009 (1 + cos(11 pi / 12)) / 2 = 0.000115); a
# misspelt one lists the choices; --min-lr needs a decay, and below --lr.
if expect 0 "batch 16, adam lr 0.001, cosine to 0.0001 over 16 steps, 4 warmup steps" -- train "$MODEL" \
    --data synthetic --steps 16 --batch 16 --lr-schedule cosine --warmup 4 --min-lr 0.0001 \
    --metrics "$T/cosine.json"; then
    check "train: the last step's scheduled rate" grep -q "step 16/16 loss [0-9.]* lr 0.000115 " "$ERR"
    # ... and in --metrics (until 2026-12-05 only the base rate was there).
    file_check "train --metrics: the last step's rate" "$T/cosine.json" '
import math
s = p["lr_schedule"]
want = 0.0001 + 0.0009 * (1 + math.cos(11 * math.pi / 12)) / 2
assert abs(s["last_lr"] - want) < 1e-15 and p["lr"] == 0.001, (s, want)'
fi
expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --metrics "$T/constant.json"
file_check "train --metrics: no last_lr where the rate never moves" "$T/constant.json" '
assert "last_lr" not in p["lr_schedule"], p["lr_schedule"]'
usage_error "--lr-schedule: unknown learning-rate schedule 'step' (expected constant, cosine or linear)" -- \
    train "$MODEL" --lr-schedule step
usage_error "--warmup 16 is not below the run's 16 steps: the rate would never reach --lr" -- \
    train "$MODEL" --data synthetic --steps 16 --warmup 16
usage_error "--min-lr is where a decay ends; the constant schedule has none" -- \
    train "$MODEL" --min-lr 0.001
usage_error "--min-lr 0.01 is above the learning rate 0.001: the schedule would climb" -- \
    train "$MODEL" --lr-schedule linear --min-lr 0.01
# Schedules that would change nothing (until 2026-12-05 they ran).
usage_error "--min-lr 0.001 is the learning rate: the rate would not fall (the constant schedule, the default, runs so)" -- \
    train "$MODEL" --lr-schedule cosine --min-lr 0.001
usage_error "--lr-schedule linear lowers the rate from --lr, here 0: it changes nothing" -- \
    train "$MODEL" --lr-schedule linear --lr 0
usage_error "--warmup ramps the rate up to --lr, here 0: it changes nothing" -- \
    train "$MODEL" --warmup 3 --lr 0
usage_error "--warmup: -1 is outside 0..4611686018427387903" -- train "$MODEL" --warmup -1
usage_error "--lr-schedule changes nothing with --steps 0" -- \
    train "$MODEL" --steps 0 --lr-schedule cosine
# Gradient clipping: named in the header, counted at the end and in the
# metrics; a limit of 0 or below, or with --steps 0, is refused.
if expect 0 "adam lr 0.001, clipping at norm 0.001" -- train "$MODEL" --data synthetic \
    --steps 4 --batch 16 --devices cpu:2 --microbatches 2 --clip-grad-norm 0.001 \
    --metrics "$T/clip.json"; then
    stdout_has "gradients clipped to norm 0.001 in 4 of the 4 steps taken; the last one's norm " \
        "train: clipped steps counted"
    check "train --metrics: clipping" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["clip_grad_norm"] == 0.001 and d["clipped_steps"] == 4 and d["grad_norm"] > 0.001, d
' "$T/clip.json"
fi
usage_error "--clip-grad-norm: 0 is outside 1e-30..1e+30" -- train "$MODEL" --clip-grad-norm 0
usage_error "--clip-grad-norm changes nothing with --steps 0" -- \
    train "$MODEL" --steps 0 --clip-grad-norm 1
printf 'input channels=4 height=1 width=1\nsoftmax_cross_entropy\n' >"$T/loss_only.model"
usage_error "2 stages but the model has only 1 layer" -- plan "$T/loss_only.model" --devices cpu:2
usage_error "12 stages (3 devices x --chunks 4) but the model has only 8 layers" -- plan "$MODEL" \
    --devices cpu:3 --schedule interleaved --chunks 4 --microbatches 3
check "one layer, not '1 layers'" test "$(grep -c '1 layers' "$ERR")" -eq 0
# A run whose weights diverge says so instead of printing "-nan".
MLP=$ROOT/examples/mlp_balanced.model
if expect 0 "" -- train "$MLP" --data synthetic --optimizer sgd --lr 1000000 --nan skip \
    --nan-limit 1000 --steps 40 --batch 16; then
    stdout_has "(test loss not finite)" "diverged run"
    check "no nan printed" test "$(grep -ci nan "$OUT")" -eq 0
fi
# A stop for non-finite values loses nothing: no stage took the step, so
# the state before it is saved, and a run goes on from it with other
# settings. With --nan stop at the first such step, with skip past the limit.
# An earlier run's metrics lie where this one's would go, and are said to be.
echo '{"earlier": true}' >"$T/diverged.json"
expect 1 "step 3 (epoch 1): stage 0, micro-batch 0, layer 10 (softmax_cross_entropy): the loss is not finite; no stage took the step (--nan skip would go on); the training state before step 3 is saved in $T/diverged.st" \
    -- train "$MLP" --data synthetic --optimizer sgd --lr 1000000 --steps 40 --batch 16 \
    --save "$T/diverged.st" --metrics "$T/diverged.json" --timeline "$T/diverged.svg"
check "a failed run names the reports it did not write" grep -qF \
    "brigade train: the run failed, so --metrics $T/diverged.json and --timeline $T/diverged.svg were not written (a file there is an earlier run's)" \
    "$ERR"
# ... as every note names a file: an escape sequence in it shown as \xNN
# (until 2026-12-04 this note printed it raw).
esc_metrics=$(printf '%s/m\033[31m.json' "$T")
expect 1 "so --metrics $T/m\x1b[31m.json was not written" -- train "$MLP" --data synthetic \
    --optimizer sgd --lr 1000000 --steps 40 --batch 16 --metrics "$esc_metrics"
check "a failed run's unwritten report: no ESC byte" sh -c "! grep -q \"$(printf '\033')\" '$ERR'"
# No file there: none is called an earlier run's (until 2026-12-04 the note
# always said one was).
check "a failed run's unwritten report: no earlier file, none named" \
    grep -qFx "brigade train: the run failed, so --metrics $T/m\x1b[31m.json was not written" "$ERR"
# Its metrics: the SGD settings, the skipped steps, a test loss that is
# not finite as null.
expect 0 "" -- train "$MLP" --data synthetic --optimizer sgd --lr 1000000 --momentum 0.5 \
    --weight-decay 0.01 --nan skip --nan-limit 1000 --steps 6 --batch 16 --test-samples 64 \
    --metrics "$T/skipped.json"
check "train --metrics: optimizer settings, skipped steps, a test loss not finite" python3 -c '
import json, re, sys
p = json.load(open(sys.argv[1]))
assert (p["momentum"], p["weight_decay"], p["nesterov"], p["dampening"]) == (0.5, 0.01, False, 0), p
assert p["skipped_steps"] == int(re.search(r"skipped ([0-9]+) steps? for non-finite",
                                           open(sys.argv[2]).read()).group(1)), p
assert p["skipped_steps"] > 0 and p["test_loss"] is None, p' "$T/skipped.json" "$OUT"
# Every step of the last epoch skipped (weights so large that no loss is
# finite): no mean loss, rather than 0 (until 2026-12-04 "last epoch's mean
# loss 0.0000" and "loss": 0).
expect 0 "" -- train "$MLP" --data synthetic --optimizer sgd --lr 1000000 --nan skip \
    --nan-limit 1000 --steps 40 --batch 16 --test-samples 64 --save "$T/huge.st"
expect 0 "" -- train "$MLP" --data synthetic --steps 3 --batch 16 --load "$T/huge.st" \
    --nan skip --test-samples 64 --metrics "$T/all-skipped.json"
stdout_has "no step of the last epoch counted (all skipped, below)" "every step skipped: no mean"
# Skipped steps ran and trained nothing (until 2026-12-05 "trained 3 steps").
stdout_has "ran 3 steps, all skipped (no update) in " "every step skipped: none called trained"
check "every step skipped: the progress line has no loss" grep -qF "step 3/3 loss - " "$ERR"
# --nan-limit counts the whole run's skipped steps: a resumed run already
# past it is refused before its first step (until 2026-12-05 it ran one).
expect 2 "--resume: $T/huge.st: the run skipped 38 steps for non-finite values already, more than --nan-limit 5, which counts the whole run's (a larger --nan-limit goes on)" \
    -- train "$MLP" --data synthetic --optimizer sgd --lr 1000000 --nan skip --nan-limit 5 \
    --steps 41 --batch 16 --test-samples 64 --resume "$T/huge.st"
# At the limit it runs: its next skipped step is the one past it.
expect 1 "39 steps skipped for non-finite values, more than --nan-limit 38" \
    -- train "$MLP" --data synthetic --optimizer sgd --lr 1000000 --nan skip --nan-limit 38 \
    --steps 41 --batch 16 --test-samples 64 --resume "$T/huge.st"
check "every step skipped: the metrics' loss is null, not 0" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
assert p["loss"] is None and p["skipped_steps"] == 3, p' "$T/all-skipped.json"
# SGD at lr x weight decay 1e12 makes the weights infinite at step 4 (each
# update multiplies them by about -1e12). A save of them is refused and
# the file keeps step 2; without that save, step 5 stops, under --nan skip
# too (skipping cannot mend weights), saying so and what the file holds
# (until 2026-12-05 step 4's unloadable state replaced step 2's).
printf 'input channels=1 height=28 width=28\nflatten\ndense units=10\nsoftmax_cross_entropy\n' \
    >"$T/linear.model"
set -- train "$T/linear.model" --data synthetic --optimizer sgd --lr 1e6 --weight-decay 1e6 \
    --batch 16 --test-samples 64
expect 1 "stopped after step 4 of 20, whose training state was not saved: $T/inf.st: not written: tensor '1.weight' holds 7840 non-finite values (NaN or infinity; the first at element 0), which no run could resume from (an update left them so: a smaller learning rate or weight decay may keep them finite); $T/inf.st holds step 2" \
    -- "$@" --steps 20 --save "$T/inf.st" --save-every 2
expect 0 "" -- train "$T/linear.model" --data synthetic --steps 0 --load "$T/inf.st" \
    --test-samples 64
expect 1 "step 5 (epoch 1): stage 0, micro-batch 0, layer 2 (softmax_cross_entropy): the loss is not finite, and the weights are not finite: tensor '1.weight' holds 7840 non-finite values (NaN or infinity; the first at element 0), left by an update before this step (skipping steps cannot mend them; a smaller learning rate or weight decay may keep them finite); $T/inf.st holds step 3 (--resume" \
    -- "$@" --steps 20 --save "$T/inf.st" --save-every 3 --nan skip --nan-limit 100
expect 1 "; this run wrote nothing to $T/inf-none.st before it (no run could resume from these weights)" \
    -- "$@" --steps 20 --save "$T/inf-none.st"
check "weights that are not finite: nothing written" test ! -e "$T/inf-none.st"
# Four steps stop short of infinity: the progress line and the closing one
# give the mean loss with an exponent (until 2026-12-05 "%.4f", cut to 31
# digits in the progress line's 32 bytes, 36 digits in the closing line).
expect 0 "epoch 1/1 step 4/4 loss 2.315e+35 " -- "$@" --steps 4
stdout_has "last epoch's mean loss 2.315e+35" "the closing line's loss with an exponent too"
# A recording no timeline can hold is refused before the run, not once its
# steps are reached (until 2026-12-05 after every step before them): 16
# devices of 8,192 micro-batches a step, 1,000 steps, whose bound on the
# events (six an op, the most a GPU's copies record, and two a stage at the
# optimizer step) is past what a timeline holds on any machine.
python3 -c '
print("input channels=1 height=1 width=8\nflatten")
for _ in range(16): print("dense units=8 activation=relu")
print("dense units=10\nsoftmax_cross_entropy")' >"$T/deep16.model"
expect 2 "timeline: recording up to 1573120000 events" -- train "$T/deep16.model" --data synthetic \
    --devices cpu:16 --batch 8192 --microbatches 8192 --steps 1000 --record-steps 1000
check "a recording too large: refused before the first step" sh -c "! grep -q 'step 1/' '$ERR'"
# A resumed run whose steps are all skipped names its steps before saying so.
expect 0 "" -- train "$MLP" --data synthetic --optimizer sgd --lr 1000000 --nan skip \
    --nan-limit 1000 --steps 42 --batch 16 --test-samples 64 --resume "$T/huge.st"
stdout_has "ran 2 steps (41 to 42 of the run), all skipped (no update) in " \
    "a resumed run, every step skipped: its steps, then the skips"
# Checkpoint writes are not counted as the steps' time (until 2026-12-05
# train_seconds and samples/s took them in): said apart, and in the metrics.
expect 0 "" -- train "$MLP" --data synthetic --steps 4 --batch 16 --test-samples 64 \
    --save "$T/timed.st" --save-every 2 --metrics "$T/timed.json"
stdout_has " writing checkpoints): " "the checkpoints' time said apart"
check "save_seconds apart from train_seconds" python3 -c '
import json, re, sys
p = json.load(open(sys.argv[1]))
assert p["save_seconds"] > 0 and p["train_seconds"] > 0, p
assert abs(p["samples_per_s"] - 4 * 16 / p["train_seconds"]) < 1e-6 * p["samples_per_s"], p
line = [l for l in open(sys.argv[2]) if l.startswith("trained 4 steps in ")][0]
assert re.search(r"\(and [0-9.]+ m?s writing checkpoints\)", line), line' "$T/timed.json" "$OUT"
# Synthetic inputs so large that one per class passes 1 GiB: one sample
# each, and the note says why rather than promising 1 GiB at most (until
# 2026-12-05).
# A sample of 4 TiB: no machine's memory holds it.
printf 'input channels=4 height=1048576 width=1048576\navgpool size=65536 stride=65536\nflatten\ndense units=10\nsoftmax_cross_entropy\n' \
    >"$T/huge-input.model"
expect 1 "dataset: 1 sample of shape 4x1048576x1048576 takes 4398046511108 bytes, more than this machine's" \
    -- train "$T/huge-input.model" --data synthetic --steps 0
check "synthetic data: prototypes past 1 GiB are the reason given" grep -qFx \
    "note: --data synthetic makes 1 training and 1 test sample of 4x1048576x1048576, not 8192 and 2048: one each, as its 10 class prototypes alone take 163840.0 GiB" \
    "$ERR"
expect 1 "the last: step 5: stage 0, micro-batch 0, layer 10 (softmax_cross_entropy): the loss is not finite; the training state before step 5 is saved in $T/diverged.st" \
    -- train "$MLP" --data synthetic --optimizer sgd --lr 1000000 --steps 40 --batch 16 \
    --nan skip --nan-limit 2 --save "$T/diverged.st"
expect 0 "resuming $T/diverged.st at step 4 (epoch 1, sample 64)" -- train "$MLP" \
    --data synthetic --optimizer sgd --lr 0.01 --steps 6 --batch 16 --nan skip \
    --resume "$T/diverged.st"
# Steps skipped before a resume, none after: the count carries over and
# the line says where they were (until 2026-12-04 it ended "the last at "
# and nothing). The file is a clean run's with its counts edited
# (tests/support/edit_checkpoint.py makes the header checksum right again).
edit_checkpoint() { python3 "$ROOT/tests/support/edit_checkpoint.py" "$@"; }
expect 0 "" -- train "$MLP" --data synthetic --steps 4 --batch 16 --save "$T/clean.st"
edit_checkpoint "$T/clean.st" "$T/skipped-before.st" brigade.skipped_steps=2 brigade.optimizer_steps=2
expect 0 "resuming $T/skipped-before.st at step 4" -- train "$MLP" --data synthetic --steps 6 \
    --batch 16 --nan skip --resume "$T/skipped-before.st" --test-samples 64
check "skips before the resume: said so" grep -qFx \
    "skipped 2 steps for non-finite values, all before step 5, where this process resumed the run" \
    "$OUT"
# A tensor the model does not have is refused, as --load refuses it (until
# 2026-12-04 --resume took the file), and one of another shape names both
# shapes (it said "does not have the model's shape").
edit_checkpoint "$T/clean.st" "$T/foreign.st" +zzz
usage_error "$T/foreign.st: tensor 'zzz' is not part of this model" \
    -- train "$MLP" --data synthetic --steps 6 --batch 16 --resume "$T/foreign.st"
edit_checkpoint "$T/clean.st" "$T/foreign-state.st" +optimizer.m.99.weight
usage_error "$T/foreign-state.st: tensor 'optimizer.m.99.weight' is not part of this model" \
    -- train "$MLP" --data synthetic --steps 6 --batch 16 --resume "$T/foreign-state.st"
edit_checkpoint "$T/clean.st" "$T/reshaped.st" 1.weight@shape=512,2048
usage_error "$T/reshaped.st: tensor '1.weight' has shape [512, 2048]; the model needs [1024, 1024]" \
    -- train "$MLP" --data synthetic --steps 6 --batch 16 --resume "$T/reshaped.st"
# Counts that do not add up are refused: each step updates or is skipped.
edit_checkpoint "$T/clean.st" "$T/miscounted.st" brigade.skipped_steps=2
expect 2 "$T/miscounted.st: brigade.optimizer_steps 4 and brigade.skipped_steps 2 do not add up to brigade.step 4" \
    -- train "$MLP" --data synthetic --steps 6 --batch 16 --resume "$T/miscounted.st"
# A file from before brigade.skipped_steps whose steps did not all update
# counts the others as skipped: resumed and saved again, the counts add up
# and resume (until 2026-12-04 the second resume was refused).
edit_checkpoint "$T/clean.st" "$T/pre-skipped.st" -brigade.skipped_steps brigade.optimizer_steps=2
expect 0 "" -- train "$MLP" --data synthetic --steps 6 --batch 16 --resume "$T/pre-skipped.st" \
    --save "$T/after-pre-skipped.st" --test-samples 64
check "a file without skipped_steps: its steps without an update counted as skipped" grep -qFx \
    "skipped 2 steps for non-finite values, all before step 5, where this process resumed the run" \
    "$OUT"
expect 0 "resuming $T/after-pre-skipped.st at step 6" -- train "$MLP" --data synthetic \
    --steps 8 --batch 16 --resume "$T/after-pre-skipped.st" --test-samples 64
# A checkpoint of the older format (no batch, no training set size) has
# its position and step checked at the run's batch: it resumes where they
# agree; where they do not it would run too few steps (until 2026-12-04
# an epoch past the run's last ran none, "trained 0 steps (5 to 4 of the
# run)"; until 2026-12-05 a position past its step ended the run early,
# exit 0, without --save).
edit_checkpoint "$T/clean.st" "$T/older.st" -brigade.batch -brigade.train_samples
expect 0 "resuming $T/older.st at step 4 (epoch 1, sample 64)" -- train "$MLP" --data synthetic \
    --steps 6 --batch 16 --resume "$T/older.st" --test-samples 64 --save "$T/older-on.st"
# Its run's checkpoints record both again (their position was checked).
expect 0 "resuming $T/older-on.st at step 6" -- train "$MLP" --data synthetic --steps 7 \
    --batch 16 --resume "$T/older-on.st" --test-samples 64
usage_error "--resume: $T/older-on.st: the run was saved at --batch 16, this one has --batch 32" -- \
    train "$MLP" --data synthetic --steps 7 --batch 32 --resume "$T/older-on.st"
for edit in brigade.epoch=5 brigade.position=8000 brigade.position=72; do
    edit_checkpoint "$T/clean.st" "$T/older.st" -brigade.batch -brigade.train_samples "$edit"
    expect 2 "; it records neither its batch nor its training set's size (an older checkpoint): resume it with the --batch and the --data it was saved with" \
        -- train "$MLP" --data synthetic --steps 300 --batch 16 --resume "$T/older.st"
done
edit_checkpoint "$T/clean.st" "$T/older.st" -brigade.batch brigade.epoch=5
expect 2 "; it records no batch (an older checkpoint): resume it with the --batch it was saved at" \
    -- train "$MLP" --data synthetic --steps 300 --batch 16 --resume "$T/older.st"
# A batch without a training set's size is checked as well (until
# 2026-12-05: epoch 5 at step 4 ran nothing, exit 0).
edit_checkpoint "$T/clean.st" "$T/halved.st" -brigade.train_samples brigade.epoch=5
expect 2 "--resume: $T/halved.st: at --batch 16 the checkpoint's position, sample 64 of epoch 5, is not its step 4 (epochs of 512 steps); it records no training set's size: resume it with the --data it was saved with" \
    -- train "$MLP" --data synthetic --steps 300 --batch 16 --resume "$T/halved.st"
# A position into an epoch at step 0 names no batch the file lacks.
edit_checkpoint "$T/clean.st" "$T/older.st" -brigade.batch -brigade.train_samples brigade.step=0 \
    brigade.optimizer_steps=0 brigade.skipped_steps=0 brigade.epoch_steps=0 brigade.epoch_loss_sum=0
expect 2 "$T/older.st: brigade.position 64 is samples into an epoch, but brigade.step is 0: no step trained on them" \
    -- train "$MLP" --data synthetic --steps 300 --batch 16 --resume "$T/older.st"
edit_checkpoint "$T/clean.st" "$T/older.st" -brigade.batch -brigade.train_samples brigade.position=72
expect 2 "" -- train "$MLP" --data synthetic --steps 300 --batch 16 --resume "$T/older.st"
check "the position and step it names" grep -qF "at --batch 16 the checkpoint's position, sample 72 of epoch 1, is not its step 4 (epochs of 512 steps); it records neither" "$ERR"
usage_error "--seed: expected a whole number from 0 to 18446744073709551615, got '-5'" -- \
    train "$MODEL" --seed -5
usage_error "--seed: expected a whole number from 0 to 18446744073709551615, got '18446744073709551616'" \
    -- train "$MODEL" --seed 18446744073709551616
# A seed past 2^53 is written whole, so that the run can be made again; any
# 64-bit seed is one.
if expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 16 \
    --seed 18446744073709551615 --metrics "$T/seed.json"; then
    check "--metrics keeps a large seed exact" grep -qF '"seed":	18446744073709551615,' "$T/seed.json"
fi
usage_error "--nan: expected stop or skip, got 'maybe'" -- train "$MODEL" --nan maybe
usage_error "--nan: expected stop or skip, got ''" -- train "$MODEL" --nan ''
usage_error "--nan-limit: -1 is outside 0..4611686018427387903" -- train "$MODEL" --nan-limit -1
usage_error "--nan-limit: expected an integer, got 'x'" -- train "$MODEL" --nan-limit x
usage_error "--stall-timeout: -1 is outside 0..1e+09" -- train "$MODEL" --stall-timeout -1
# An option this placement would not use (the profile's: test_simulate.sh).
usage_error "--stall-timeout times a stage's waits on its neighbours; this run has one stage, which never waits" \
    -- train "$MODEL" --data synthetic --steps 1 --stall-timeout 5
usage_error "--stall-timeout: expected a number, got 'abc'" -- train "$MODEL" \
    --stall-timeout abc
# A stage that stalls stops the run: the message names the step and says
# what --save holds, on its first line, before the flight recorder.
rm -f "$T/stalled.st"
expect 1 "(stall timeout); " -- train "$MODEL" --data synthetic --steps 20 --batch 16 \
    --devices cpu:2 --microbatches 4 --stall-timeout 1e-9 --save "$T/stalled.st" --save-every 1
check "a stall names its step and what --save holds" grep -qE \
    "^brigade train: step [0-9]+ \(epoch 1\): stage [01] on cpu:[01], micro-batch [0-3], .* \(stall timeout\); ($T/stalled.st holds step [0-9]+ \(--resume .* goes on from there\)|this run wrote nothing to $T/stalled.st before it \(a step stopped midway is not saved\))$" \
    "$ERR"
check "the flight recorder follows" grep -qFx "flight recorder (ms from the step's start):" "$ERR"
usage_error "--record-steps: 0 is outside 1..1000" -- train "$MODEL" --record-steps 0
usage_error "--record-steps: 1001 is outside 1..1000" -- train "$MODEL" --record-steps 1001
usage_error "--weight-decay: -0.1 is outside 0..1e+06" -- train "$MODEL" --weight-decay -0.1
usage_error "--weight-decay: expected a number, got 'inf'" -- train "$MODEL" --weight-decay inf
usage_error "cannot read '$T/missing.model': No such file or directory" -- \
    train "$T/missing.model" --data synthetic --steps 1
usage_error "$T/unknown.model:3:1:" -- train "$T/unknown.model" --data synthetic --steps 1
# --tf32 only matters on GPUs: refused on CPU devices, where it would change
# nothing, but accepted with --devices auto, which runs on GPUs where there
# are some (and on the CPU here, saying it changes nothing).
usage_error "--tf32 applies to CUDA devices only; this run's devices are CPU cores (cpu:0), whose ops never round to TF32" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 8 --tf32
# brigade's own view of the GPUs decides (a build without CUDA sees none).
if ! "$BRIGADE" topo 2>/dev/null | grep -q '^CUDA: built, [1-9]'; then
    expect 0 "note: --tf32 changes nothing here: --devices auto found no GPU and took CPU cores" \
        -- train "$MODEL" --data synthetic --steps 1 --batch 8 --devices auto --tf32
else
    expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 8 --devices auto --tf32
    check "--tf32 with GPUs found: no note" sh -c "! grep -q 'changes nothing' '$ERR'"
fi
# --conv-workspace likewise: it bounds cuDNN's algorithms, which CPU
# devices do not run.
usage_error "--conv-workspace applies to CUDA devices only; this run's devices are CPU cores (cpu:0, cpu:1)" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 8 --devices cpu:2 --conv-workspace 64M
if ! "$BRIGADE" topo 2>/dev/null | grep -q '^CUDA: built, [1-9]'; then
    expect 0 "note: --conv-workspace changes nothing here: --devices auto found no GPU and took CPU cores" \
        -- train "$MODEL" --data synthetic --steps 1 --batch 8 --devices auto --conv-workspace 0
fi
usage_error "--conv-workspace: expected a size like 1000000, 512M, 8G or 1.5G, got 'lots'" -- \
    sweep "$MODEL" --simulate --devices cuda:0 --conv-workspace lots --microbatches 1,2

# --- train: data errors ------------------------------------------------------

usage_error "--data /nonexistent/data: no such directory; it takes fashion-mnist, synthetic or a directory of IDX files" \
    -- train "$MODEL" --data /nonexistent/data --steps 1
usage_error "--data fashion: no such directory; it takes fashion-mnist, synthetic" \
    -- train "$MODEL" --data fashion --steps 1
usage_error "$T: no train-images-idx3-ubyte: tried $T/train-images-idx3-ubyte and" \
    -- train "$MODEL" --data "$T" --steps 1
# A folder whose files cannot be looked for (no search permission, for a
# user other than root) is not called empty (until 2026-12-06 "no
# train-images-idx3-ubyte: tried ..."). Root (whom no permission stops)
# runs it as nobody, where setpriv can.
as_user="" # root runs it as nobody, where it can
if [ "$(id -u)" = 0 ]; then
    as_user="setpriv --reuid=65534 --regid=65534 --clear-groups"
    $as_user "$BRIGADE" --version >/dev/null 2>&1 && $as_user test -r "$MODEL" || as_user=none
fi
if [ "$as_user" != none ]; then
    unsearchable=$(mktemp -d /tmp/brigade-unsearchable.XXXXXX)
    chmod 755 "$unsearchable"
    mkdir -m 644 "$unsearchable/data"
    # shellcheck disable=SC2086 # as_user is a command and its options, or nothing
    (cd "$unsearchable" && $as_user "$BRIGADE" train "$MODEL" --data data --steps 1) \
        </dev/null >"$OUT" 2>"$ERR"
    status=$?
    check "--data a folder nobody may search: exit status 2 (was $status)" test "$status" -eq 2
    check "--data a folder nobody may search: said so" grep -qxF \
        "brigade train: cannot look for 'data/train-images-idx3-ubyte': Permission denied" "$ERR"
    chmod 755 "$unsearchable/data"
    rm -rf "$unsearchable"
    # A writable file of root's in a sticky folder (as in /tmp), which the
    # user nobody cannot replace: said before the run (until 2026-12-06
    # after it, when the rename failed).
    if [ -n "$as_user" ]; then # the file must be another user's
        sticky=$(mktemp -d /tmp/brigade-sticky.XXXXXX)
        chmod 1777 "$sticky"
        echo '{}' >"$sticky/m.json"
        chmod 666 "$sticky/m.json"
        # shellcheck disable=SC2086 # as above
        $as_user "$BRIGADE" train "$MODEL" --data synthetic --steps 1 --test-samples 10 \
            --metrics "$sticky/m.json" </dev/null >"$OUT" 2>"$ERR"
        status=$?
        check "--metrics another user's file in a sticky folder: exit status 2 (was $status)" \
            test "$status" -eq 2
        check "--metrics another user's file in a sticky folder: said so before the run" grep -qxF \
            "brigade train: --metrics: cannot replace '$sticky/m.json': it is another user's, in folder '$sticky', whose sticky bit (as on /tmp) lets only its owner replace it (give another name)" \
            "$ERR"
        check "--metrics another user's file in a sticky folder: kept" test "$(cat "$sticky/m.json")" = '{}'
        # The same file through a link of nobody's, which leads there: the
        # file would be replaced, so the same refusal. And a link to a
        # writable file in a folder nobody cannot write: no new file can
        # be made there (both until 2026-12-06 written through the link).
        links=$(mktemp -d /tmp/brigade-links.XXXXXX)
        chmod 777 "$links"
        ln -s "$sticky/m.json" "$links/m.json"
        mkdir -m 755 "$links/closed"
        echo '{}' >"$links/closed/m.json"
        chmod 666 "$links/closed/m.json"
        ln -s closed/m.json "$links/c.json"
        # shellcheck disable=SC2086 # as above
        $as_user "$BRIGADE" simulate "$MODEL" --metrics "$links/m.json" </dev/null >"$OUT" 2>"$ERR"
        status=$?
        check "--metrics through a link to another user's file in a sticky folder: exit status 2 (was $status)" \
            test "$status" -eq 2
        check "--metrics through a link to another user's file in a sticky folder: said so" grep -qF \
            "cannot replace '$sticky/m.json': it is another user's" "$ERR"
        # shellcheck disable=SC2086 # as above
        $as_user "$BRIGADE" simulate "$MODEL" --metrics "$links/c.json" </dev/null >"$OUT" 2>"$ERR"
        status=$?
        check "--metrics through a link into a closed folder: exit status 2 (was $status)" \
            test "$status" -eq 2
        check "--metrics through a link into a closed folder: said so" grep -qxF \
            "brigade simulate: --metrics: cannot write '$links/c.json': folder '$links/closed': Permission denied" \
            "$ERR"
        check "--metrics through a link into a closed folder: kept" \
            test "$(cat "$links/closed/m.json")" = '{}'
        rm -rf "$sticky" "$links"
    fi
fi
# A folder given with its slash: one between it and a file's name.
usage_error "$T/: no train-images-idx3-ubyte: tried $T/train-images-idx3-ubyte and $T/train-images-idx3-ubyte.gz" \
    -- train "$MODEL" --data "$T/" --steps 1

# IDX files of the wrong shape: 2 images of 4x4 where the model wants 28x28.
mkdir "$T/idx4x4"
for set in train t10k; do
    {
        printf '\000\000\010\003\000\000\000\002\000\000\000\004\000\000\000\004'
        head -c 32 /dev/zero
    } >"$T/idx4x4/$set-images-idx3-ubyte"
    printf '\000\000\010\001\000\000\000\002\001\002' >"$T/idx4x4/$set-labels-idx1-ubyte"
done
usage_error "$T/idx4x4/train-images-idx3-ubyte: images are 1x4x4 but the model's input is 1x28x28 (an input line of channels=1 height=4 width=4 takes them; --data synthetic makes samples of any shape, for timing a model that has no data set)" \
    -- train "$MODEL" --data "$T/idx4x4" --steps 1
# Their labels are 1 and 2: a model of 2 classes is told about label 2, and
# only once the shape fits (the shape first, as the more basic fit).
printf 'input channels=1 height=4 width=4\nflatten\ndense units=2\nsoftmax_cross_entropy\n' \
    >"$T/two4x4.model"
usage_error "$T/idx4x4/train-labels-idx1-ubyte: label 2 at index 1 is outside 0..1: the model has 2 classes (the outputs of its softmax_cross_entropy)" \
    -- train "$T/two4x4.model" --data "$T/idx4x4" --steps 1
sed 's/units=2/units=3/' "$T/two4x4.model" >"$T/three4x4.model"
expect 0 "" -- train "$T/three4x4.model" --data "$T/idx4x4" --steps 1 --batch 2
stdout_has "test accuracy: " "a model of 3 classes on labels 1 and 2"
# An evaluation (--steps 0) reads the test files only; training needs all.
mkdir "$T/test-only"
cp "$T/idx4x4"/t10k-* "$T/test-only/"
expect 0 "evaluating $T/three4x4.model on $T/test-only: 2 test samples, batch 64" -- \
    train "$T/three4x4.model" --data "$T/test-only" --steps 0
stdout_has "test accuracy: " "--steps 0 on a folder of test files only"
usage_error "$T/test-only: no train-images-idx3-ubyte" -- \
    train "$T/three4x4.model" --data "$T/test-only" --steps 1

# --- train: a short real run -------------------------------------------------

W=$T/W.safetensors
M=$T/M.json
if expect 0 "" -- train "$MODEL" --data synthetic --steps 3 --batch 16 --metrics "$M" \
    --save "$W"; then
    stdout_has "test accuracy" "short training run"
    check "checkpoint written" test -s "$W"
    check "metrics JSON has loss, test_accuracy, samples_per_s and steps == 3" \
        python3 -c '
import json, math, sys
m = json.load(open(sys.argv[1]))
for key in ("loss", "test_accuracy", "samples_per_s", "steps"):
    assert key in m, key
assert m["steps"] == 3, m["steps"]
assert math.isfinite(m["loss"]) and m["loss"] > 0, m["loss"]
assert 0 <= m["test_accuracy"] <= 1, m["test_accuracy"]
assert m["samples_per_s"] > 0, m["samples_per_s"]
' "$M"
    grep '^test accuracy: ' "$OUT" >"$T/accuracy.trained"
    # Not a terminal: plain progress lines, no carriage returns or escapes.
    check "plain 'epoch' progress lines on stderr" grep -q '^epoch 1/1 step 3/3' "$ERR"
    tr -d '\r\033' <"$ERR" >"$T/stderr.plain"
    check "no carriage returns or escapes in progress" cmp -s "$ERR" "$T/stderr.plain"
    leftovers=
    for file in "$T"/W.safetensors?* "$T"/.W.safetensors*; do
        [ -e "$file" ] && leftovers="$leftovers $file"
    done
    check "no temporary files left beside the checkpoint:$leftovers" test -z "$leftovers"
fi

# On a terminal the progress line is redrawn in place, as wide as the
# terminal allows: the bar at 120 columns; at 60 neither bar nor rate, so
# that no redraw wraps (a wrapped line leaves a copy at every redraw).
if command -v script >/dev/null 2>&1; then
    for cols in 120 60; do
        script -qc "stty cols $cols; '$BRIGADE' train '$MODEL' --data synthetic --steps 200 \
            --batch 16" /dev/null </dev/null >"$T/pty$cols.txt" 2>&1
    done
    check "a 120-column terminal: the bar" grep -q 'epoch 1/1 \[#' "$T/pty120.txt"
    check "a 60-column terminal: every progress line under 60 columns, without the bar" \
        python3 -c '
import re, sys
text = open(sys.argv[1], "rb").read().decode()
lines = [re.sub(r"\x1b\[K", "", part) for part in re.split(r"[\r\n]", text)]
progress = [line for line in lines if line.startswith("epoch 1/1 ")]
assert progress, text
assert all(len(line) < 60 and "[" not in line for line in progress), progress' "$T/pty60.txt"
fi

# --steps alone runs that many steps over as many epochs as they take (the
# synthetic set is 8,192 samples: 2 steps an epoch at batch 4096); with
# --epochs too, whichever ends first.
if expect 0 "" -- train "$MODEL" --data synthetic --steps 5 --batch 4096 --metrics "$M"; then
    check "--steps 5 at 2 steps an epoch: 5 steps over 3 epochs" \
        python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["steps"] == 5' "$M"
    check "progress reaches epoch 3/3 step 5/5" grep -q '^epoch 3/3 step 5/5' "$ERR"
    check "a batch that divides the set: no step is short" sh -c "! grep -q 'last batch' '$OUT'"
fi
# One time for both figures (until 2026-12-06 the summary's clock ran on
# after the last report, which a run of a few short steps shows: 3,113
# samples/s after a line of 3,293).
if expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --devices cpu:2 \
    --trace "$T/rate.json"; then
    check "the last progress line's samples/s is the summary's" python3 -c '
import re, sys
done = [l for l in open(sys.argv[1]) if l.endswith("(done)\n")]
trained = [l for l in open(sys.argv[2]) if l.startswith("trained 2 steps")]
rate = lambda l: re.search(r" ([0-9]+) samples/s", l).group(1)
assert len(done) == 1 and len(trained) == 1 and rate(done[0]) == rate(trained[0]), (done, trained)' \
        "$ERR" "$OUT"
fi
# Where it does not, an epoch's last step is short, and the summary of the
# recorded steps says which (a new user took a step of 32 samples for a
# fast one): 8,192 samples at batch 3,000 leave 2,192 for step 3, and
# step 6 the same in the next epoch.
if expect 0 "" -- train "$MODEL" --data synthetic --steps 6 --batch 3000 --record-steps 5; then
    stdout_has "(steps 3, 6 each took an epoch's last batch, 2,192 of its 8,192 samples where the others take 3,000: short steps, counted in the means below, and in --trace and --timeline)" \
        "the short steps recorded are named"
fi
# Many, as a range (a reviewer's 50 were cut at 25, ending on a comma).
if expect 0 "" -- train "$MODEL" --data synthetic --steps 10 --batch 4097 --record-steps 10; then
    stdout_has "(steps 2, 4, ..., 10, every 2nd and 5 in all, each took an epoch's last batch, 4,095 of its 8,192 samples where the others take 4,097:" \
        "many short steps: a range"
fi
if expect 0 "" -- train "$MODEL" --data synthetic --steps 5 --epochs 1 --batch 4096 --metrics "$M"; then
    check "--steps 5 --epochs 1 at 2 steps an epoch: the epoch ends first" \
        python3 -c 'import json, sys; assert json.load(open(sys.argv[1]))["steps"] == 2' "$M"
fi

expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 16 --load "$W"
stdout_has "test accuracy" "training from a checkpoint"
check "--load says what it takes from the file" grep -qE "^loading the weights of $W(, saved at step [0-9]+ of its run; the optimizer state, step count and data order start afresh|; the optimizer state starts afresh)" "$ERR"
# The closing table's memory columns add up to each stage's peak.
check "train table: the memory columns add up to peak MiB" python3 -c '
import sys
lines = open(sys.argv[1]).read().splitlines()
at = [i for i, l in enumerate(lines) if l.startswith("stage  layers")][0]
head = lines[at].split()
assert head[5:12] == ["params", "grads", "optimizer", "stash", "buffers", "other", "in-flight"], head
r = lines[at + 1].split()
peak, parts = float(r[3]), [float(x) for x in r[4:10]]
assert abs(sum(parts) - peak) <= 0.035 and parts[1] == parts[0] > 0, (peak, parts)
' "$OUT"

# A model past the host's memory is refused before its data is made
# (synthetic data of 2^20 classes would need a 4 MiB prototype each, 4 TiB
# in all).
printf 'input channels=1 height=1024 width=1024\nflatten\ndense units=1048576\ndense units=1048576\nsoftmax_cross_entropy\n' \
    >"$T/huge.model"
expect 1 "$T/huge.model: out of host memory for the model's 2,199,025,352,704 parameters (8192.0 GiB" \
    -- train "$T/huge.model" --data synthetic --steps 1
# Two stages and one micro-batch take turns: train says so, and not at M=2.
expect 0 "note: with one micro-batch the 2 stages take turns and never work at once" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --devices cpu:2
expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 16 --devices cpu:2 \
    --microbatches 2
check "at M=2 no note of stages taking turns" sh -c "! grep -q 'take turns' '$ERR'"
# ... and when it is all a batch allows, or auto's choice, it says that.
expect 0 "note: a batch of one sample is one micro-batch: the 2 stages take turns" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 1 --devices cpu:2 --microbatches auto
check "no advice to use more micro-batches than samples" \
    sh -c "! grep -q -- '--microbatches 4 (or auto)' '$ERR'"
expect 0 "note: --microbatches auto chose one micro-batch: the 2 stages take turns, which the planner predicts faster" \
    -- train "$MODEL" --data synthetic --steps 1 --batch 2 --devices cpu:2 --microbatches auto
check "no advice against auto's own choice" sh -c "! grep -q -- '(or auto) lets them' '$ERR'"
# --steps 0 trains nothing and evaluates the weights: those saved at the
# end of the run above score as that run's own evaluation did, to the last
# digit, and so on two stages (whose micro-batches sum the test loss in
# another order, but within the printed digits).
M0=$T/M0.json
if expect 0 "evaluating the weights of $W, saved at step 3 of its run" -- train "$MODEL" \
    --data synthetic --batch 16 --steps 0 --load "$W" --metrics "$M0"; then
    check "--steps 0 --load: the test accuracy and loss of the run that saved the weights" \
        sh -c "grep '^test accuracy: ' '$OUT' | cmp -s - '$T/accuracy.trained'"
    stdout_has "evaluated the weights of $W; trained nothing (--steps 0)" "train --steps 0"
    check "--steps 0: the metrics have no training figures, and steps 0" python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert m["steps"] == 0 and 0 <= m["test_accuracy"] <= 1, m
assert m["test_samples"] == 2048, m  # the whole synthetic test set
for key in ("loss", "samples_per_s", "train_seconds", "schedule", "recompute"):
    assert key not in m, key
assert m["microbatches"] == 1, m
' "$M0"
fi
# An evaluation's stages run forwards only: parameters, one micro-batch's
# activations and the workspace, no gradients or optimizer state (4.5 MiB
# at batch 16). It fits 5 MiB, where training, even with SGD and
# --recompute (parameters and their gradients: 5.3 MiB), does not.
expect 2 "does not fit" -- train "$MODEL" --data synthetic --batch 16 --steps 1 --device-mem 5M \
    --optimizer sgd --recompute
if expect 0 "" -- train "$MODEL" --data synthetic --batch 16 --steps 0 --device-mem 5M \
    --metrics "$T/eval-mem.json"; then
    check "an evaluation's stages hold no gradients or optimizer state, and its metrics name no optimizer" \
        python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert "optimizer" not in m, m
(stage,) = m["stages"]
peak = stage["peak_by_category"]
assert peak["optimizer"] == 0 and peak["grads"] == 0 and peak["buffers"] == 0, stage
assert peak["params"] == 693962 * 4, stage
assert peak["stash"] > 0, stage
assert stage["peak_bytes"] <= 5 * 2**20, stage' "$T/eval-mem.json"
fi
usage_error "--recompute changes nothing with --steps 0" -- train "$MODEL" --steps 0 --recompute
usage_error "--schedule zb-h1 changes nothing with --steps 0, whose stages run their forwards only" \
    -- train "$MODEL" --steps 0 --devices cpu:2 --schedule zb-h1
expect 0 "" -- train "$MODEL" --data synthetic --batch 16 --steps 0 --load "$W" \
    --devices cpu:2 --microbatches 4
check "--steps 0 on two stages, 4 micro-batches: the same test accuracy" \
    sh -c "grep '^test accuracy: ' '$OUT' | cmp -s - '$T/accuracy.trained'"
check "--steps 0: the placement says the stages run forwards only" grep -qF \
    "placement: 2 stages on cpu:0, cpu:1; forwards only, 4 micro-batches" "$ERR"
# Interleaved changes where an evaluation's forwards run: its metrics name it.
if expect 0 "" -- train "$MODEL" --data synthetic --batch 16 --steps 0 --load "$W" \
    --devices cpu:2 --schedule interleaved --chunks 2 --microbatches 2 --metrics "$T/eval-v.json"; then
    check "--steps 0 interleaved: the metrics name the schedule, no recompute" python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert m["schedule"] == "interleaved" and m["microbatches"] == 2, m
assert "recompute" not in m, m' "$T/eval-v.json"
fi
# --test-samples scores the first N test samples: the accuracy is a count
# of them, and the metrics say how many; more than the set holds (2048
# synthetic ones) is refused.
if expect 0 "" -- train "$MODEL" --data synthetic --batch 16 --steps 0 --load "$W" \
    --test-samples 100 --metrics "$T/some.json"; then
    stdout_has "; the first 100 of 2048 test samples)" "train --test-samples 100"
    check "--test-samples 100: 100 samples scored, the accuracy a count of them" python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert m["test_samples"] == 100, m
assert abs(m["test_accuracy"] * 100 - round(m["test_accuracy"] * 100)) < 1e-9, m' "$T/some.json"
fi
usage_error "--test-samples 2049, but the test set of synthetic holds 2048" -- \
    train "$MODEL" --data synthetic --steps 1 --test-samples 2049
usage_error "--test-samples: " -- train "$MODEL" --data synthetic --steps 1 --test-samples 0
# Synthetic data are made from the seed: weights trained on --seed 7's are
# scored on them, the seed taken from the file as --resume takes it.
if expect 0 "" -- train "$MODEL" --data synthetic --batch 16 --steps 3 --seed 7 \
    --save "$T/seed7.safetensors"; then
    grep '^test accuracy: ' "$OUT" >"$T/accuracy.seed7"
    expect 0 "--seed 7, as $T/seed7.safetensors was saved with: synthetic data are made from it" \
        -- train "$MODEL" --data synthetic --batch 16 --steps 0 --load "$T/seed7.safetensors"
    check "--steps 0 --load of a --seed 7 run: that run's test accuracy" \
        sh -c "grep '^test accuracy: ' '$OUT' | cmp -s - '$T/accuracy.seed7'"
fi
expect 0 "" -- train "$MODEL" --data synthetic --batch 16 --steps 0
stdout_has "evaluated the initial weights (--seed 1); trained nothing (--steps 0)" \
    "train --steps 0 without --load"
for option in "--lr 0.1" "--epochs 2" "--save $T/never.safetensors" "--record-steps 2" \
    "--nan skip" "--optimizer sgd"; do
    # shellcheck disable=SC2086 # the option and its value, split
    usage_error "${option%% *} changes nothing with --steps 0, which trains nothing" -- \
        train "$MODEL" --data synthetic --steps 0 $option
done
usage_error "--steps 0 evaluates and trains nothing, so --resume has no run to continue; --load $W evaluates its weights" \
    -- train "$MODEL" --data synthetic --steps 0 --resume "$W"
# --seed makes the initial weights and synthetic data: with --load on a data
# set read in order it changes nothing (accepted without a word until
# 2026-12-04); with synthetic data it makes them.
usage_error "--seed changes nothing with --steps 0 --load: the weights are the file's" -- \
    train "$MODEL" --steps 0 --load "$W" --seed 5
expect 0 "" -- train "$MODEL" --data synthetic --batch 16 --steps 0 --load "$W" --seed 5 \
    --test-samples 16
stdout_has "evaluated the weights of $W; trained nothing (--steps 0)" \
    "--steps 0 --load --seed with synthetic data: the seed makes the data"

# A truncated checkpoint is bad input naming the file.
head -c 100 "$W" >"$T/corrupt.safetensors"
usage_error "$T/corrupt.safetensors" -- train "$MODEL" --data synthetic --steps 1 \
    --load "$T/corrupt.safetensors"
# Cut past its header, the file is said to be so (a new user read only
# "data_offsets [1280, 2770176] exceed the 96944 bytes of data").
head -c 100000 "$W" >"$T/cut.safetensors"
usage_error "bytes of data after the header, where the file ends: is it cut short?" -- \
    train "$MODEL" --data synthetic --steps 0 --load "$T/cut.safetensors"
usage_error "cannot read '$T/nothing.safetensors': No such file or directory" -- \
    train "$MODEL" --data synthetic --steps 1 --load "$T/nothing.safetensors"

# A checkpoint of another model: same tensor names, other shapes.
sed 's/units=128/units=64/' "$MODEL" >"$T/small.model"
if expect 0 "" -- train "$T/small.model" --data synthetic --steps 1 --batch 16 \
    --save "$T/small.safetensors"; then
    usage_error "another model" -- train "$MODEL" --data synthetic --steps 1 \
        --load "$T/small.safetensors"
    check "another model: message names the file" grep -qF "$T/small.safetensors" "$ERR"
fi
# Another model with the same tensors (an average pool for the max-pool):
# its weights load, with a note of whose they were; --resume stays exact.
sed 's/maxpool/avgpool/' "$MODEL" >"$T/avg.model"
expect 0 "note: $W was saved from another model (fingerprint " -- train "$T/avg.model" \
    --data synthetic --steps 1 --batch 16 --load "$W"
check "same tensors: the note says they are loaded" \
    grep -qF "its tensors have this model's names and shapes, so they are loaded" "$ERR"
expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 16 --load "$W"
check "its own model's file: no note" sh -c "! grep -q 'another model' '$ERR'"

# --- placement ---
usage_error "--devices: 'gpu' is not a device list" -- train "$MODEL" --data synthetic --devices gpu
usage_error "expected cpu:N" -- train "$MODEL" --data synthetic --devices cpu:0
usage_error "cuda:200/0, a share of GPU 200: " -- train "$MODEL" --data synthetic --steps 1 \
    --devices cuda:200x2
usage_error "--devices: 'cpu:2,cuda:0' mixes CPU and CUDA devices; a placement is of one kind" -- \
    train "$MODEL" --data synthetic --steps 1 --devices cpu:2,cuda:0
# The CUDA backend is a module loaded when a GPU is first looked for
# (lib/cuda/module.h): a command on CPU devices never loads it, and one that
# cannot be loaded is named with why.
run topo
if grep -qF "CUDA: this build has no CUDA backend" "$OUT"; then
    usage_error "cuda:0: this build has no CUDA backend" -- \
        train "$MODEL" --data synthetic --steps 1 --devices cuda:0
    expect 0 "note: --devices auto takes CPU cores: this brigade was built without its CUDA backend" \
        -- plan "$MODEL" --devices auto
else
    # The build's module, found beside the program.
    stdout_has "(backend $(cd "$(dirname "$BRIGADE")/../lib" && pwd -P)/libbrigade-cuda.so)" \
        "topo names the CUDA backend it loaded"
    # Without a GPU, CUDA's own error says why it counts none, and auto
    # takes the cores saying so.
    if ! grep -q "CUDA: built, [1-9][0-9]* GPUs\? visible" "$OUT"; then
        stdout_has "CUDA: built, no GPU visible: cudaError" "topo without a GPU says why"
        expect 0 "note: --devices auto takes CPU cores: CUDA sees no GPU: cudaError" -- \
            plan "$MODEL" --devices auto
    fi
    export BRIGADE_CUDA_MODULE="$T/absent.so"
    usage_error "cuda:0: BRIGADE_CUDA_MODULE names $T/absent.so, which does not exist" -- \
        train "$MODEL" --data synthetic --steps 1 --devices cuda:0
    echo "not a library" >"$T/broken.so"
    export BRIGADE_CUDA_MODULE="$T/broken.so"
    usage_error "cuda:0: the CUDA backend $T/broken.so cannot be loaded: " -- \
        train "$MODEL" --data synthetic --steps 1 --devices cuda:0
    expect 0 "" -- topo
    stdout_has "CUDA: the CUDA backend $T/broken.so cannot be loaded" "topo, module broken"
    expect 0 "note: --devices auto takes CPU cores: the CUDA backend $T/broken.so" -- \
        plan "$MODEL" --devices auto
    export BRIGADE_CUDA_MODULE=broken.so
    usage_error "cuda:0: BRIGADE_CUDA_MODULE is 'broken.so', not a path" -- \
        train "$MODEL" --data synthetic --steps 1 --devices cuda:0
    # A library, but not brigade's (zlib, which brigade itself loads).
    zlib=$(ldd "$BRIGADE" | awk '$1 ~ /^libz\.so/ {print $3}')
    export BRIGADE_CUDA_MODULE="$zlib"
    usage_error "cuda:0: $zlib is not brigade's CUDA backend (it has no bg_cuda_module_open)" -- \
        train "$MODEL" --data synthetic --steps 1 --devices cuda:0
    unset BRIGADE_CUDA_MODULE
fi
# The loader's trace is there (file=...), and names no CUDA module.
loaded_no_module() { grep -q "file=" "$ERR" && ! grep -q "libbrigade-cuda.so" "$ERR"; }
for args in "summary $MODEL" "plan $MODEL --devices cpu:2" "simulate $MODEL --devices cpu:2" \
    "sweep $MODEL --simulate --devices cpu:2 --microbatches 1,2" \
    "profile $MODEL --devices cpu:2 --split 4 --repetitions 1 -o $T/p.json" \
    "train $MODEL --data synthetic --steps 1 --devices cpu:2"; do
    # shellcheck disable=SC2086 # the arguments are meant to split
    LD_DEBUG=files "$BRIGADE" $args </dev/null >"$OUT" 2>"$ERR"
    check "brigade $args: exit 0 (status $?)" test "$?" -eq 0
    check "brigade $args on CPU devices loads no CUDA module" loaded_no_module
done
usage_error "--tf32 applies to CUDA devices only; this run's devices are CPU cores (cpu:0, cpu:1)" -- \
    train "$MODEL" --data synthetic --steps 1 --devices cpu:2 --tf32
# The devices named are the run's, whichever option made them.
usage_error "--tf32 applies to CUDA devices only; this run's devices are CPU cores (cpu:0, cpu:1)" -- \
    train "$MODEL" --data synthetic --steps 1 --stages 2 --tf32
usage_error "--conv-workspace applies to CUDA devices only; this run's devices are CPU cores (cpu:0, cpu:1, ..., cpu:7 (8 devices))" -- \
    plan "$MODEL" --devices cpu:8 --conv-workspace 1M
usage_error "--stages 3 but --devices cpu:2 gives 2 devices" -- train "$MODEL" --data synthetic \
    --devices cpu:2 --stages 3
usage_error "9 stages but the model has only 8 layers" -- train "$MODEL" --data synthetic \
    --stages 9
usage_error "--split gives 2 boundaries; 2 stages need 1" -- train "$MODEL" --data synthetic \
    --stages 2 --split 2,4
usage_error "--split: expected layer numbers" -- train "$MODEL" --data synthetic --stages 2 \
    --split x
usage_error "--split: stage 1 would start at layer 9" -- train "$MODEL" --data synthetic --steps 1 \
    --stages 2 --split 9
usage_error "unknown schedule" -- train "$MODEL" --data synthetic --schedule pipedream
usage_error "multiple of the device count" -- train "$MODEL" --data synthetic --steps 1 \
    --devices cpu:4 --schedule interleaved --chunks 2 --microbatches 6
usage_error "--chunks applies only to the interleaved schedule" -- train "$MODEL" \
    --data synthetic --steps 1 --devices cpu:2 --chunks 2
usage_error "would leave some micro-batches empty" -- train "$MODEL" --data synthetic --steps 1 --batch 4 \
    --microbatches 8

# A real 2-stage run: the summary names both stages and the metrics list them.
M2=$T/pipeline.json
if expect 0 "placement: 2 stages on cpu:0, cpu:1; zb-h1, 4 micro-batches, recompute" -- \
    train "$MODEL" --data synthetic --steps 2 --batch 16 --devices cpu:2 --schedule zb-h1 \
    --microbatches 4 --recompute --split 4 --metrics "$M2"; then
    if grep -q "cpu:1" "$OUT" && python3 - "$M2" <<'PY'; then
import json, sys
m = json.load(open(sys.argv[1]))
stages = m["stages"]
assert len(stages) == 2, stages
assert stages[0]["layers"] == [0, 1, 2, 3], stages[0]["layers"]
assert stages[1]["layers"] == [4, 5, 6, 7], stages[1]["layers"]
assert stages[1]["device"] == "cpu:1"
assert m["schedule"] == "zb-h1" and m["microbatches"] == 4 and m["recompute"] is True
for s in stages:
    assert s["peak_bytes"] == sum(s["peak_by_category"].values()), s
assert stages[1]["peak_by_category"]["params"] == (5408 * 128 + 128 + 128 * 10 + 10) * 4
PY
        pass
    else
        fail "2-stage metrics"
    fi
fi

# Three recorded steps: the summary gives their medians beside the means,
# as the metrics hold them.
if expect 0 "" -- train "$MODEL" --data synthetic --steps 3 --batch 16 --devices cpu:2 \
    --microbatches 2 --metrics "$T/medians.json"; then
    check "the summary prints the median step, bubble and imbalance of the metrics" python3 -c '
import json, re, sys
t = json.load(open(sys.argv[1]))["timeline"]
line = re.search(r"^median of the 3 steps: step ([0-9.]+) ms, bubble ([0-9.]+)%, "
                 r"stage imbalance ([0-9.]+)%$", open(sys.argv[2]).read(), re.M)
assert line, "no median line"
ms = t["step_median_s"] * 1e3
assert line.group(1) == "%.*f" % (0 if ms >= 100 else 1 if ms >= 10 else 2 if ms >= 1 else 3, ms)
assert line.group(2) == "%.1f" % (100 * t["bubble_median"]), (line.group(2), t)
assert line.group(3) == "%.1f" % (100 * t["imbalance_median"]), (line.group(3), t)' \
        "$T/medians.json" "$OUT"
fi

# --- resuming ---
R=$T/run.safetensors
if expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --save "$R" --save-every 1; then
    stderr_has "saved the training state at step 2" "--save"
fi
if expect 0 "resuming $R at step 2 (epoch 1, sample 32)" -- train "$MODEL" --data synthetic \
    --steps 3 --batch 16 --resume "$R" --save "$R"; then
    stderr_has "saved the training state at step 3" "--resume then --save"
fi
# Resumed past where the last --record-steps would begin: it records the
# steps it runs, numbered as the run's (before, it recorded none).
if expect 0 "note: --record-steps 3: this run has 2 steps to take, all recorded" -- train \
    "$MODEL" --data synthetic --steps 5 --batch 16 --resume "$R" \
    --record-steps 3 --trace "$T/resumed.json"; then
    stdout_has "last 2 steps (4 to 5 of the run), as recorded; ms and % per step, their mean:" "a resumed run records its steps"
    check "a resumed run's trace has its steps" python3 -c '
import json, sys
spans = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "span"]
assert [e["name"] for e in spans] == ["step 4", "step 5"], spans
' "$T/resumed.json"
fi
usage_error "--load and --resume both give the weights" -- train "$MODEL" --data synthetic \
    --steps 1 --load "$R" --resume "$R"
usage_error "cannot read '$T/missing.safetensors': No such file or directory" -- \
    train "$MODEL" --data synthetic --steps 1 --resume "$T/missing.safetensors"
usage_error "saved with optimizer adam" -- train "$MODEL" --data synthetic --steps 4 --batch 16 \
    --resume "$R" --optimizer sgd
# SGD's momentum buffers: a resume may change the momentum's value, not
# whether there are buffers (it would drop them or start them mid-run).
RM=$T/momentum.safetensors
RN=$T/no-momentum.safetensors
expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --optimizer sgd \
    --momentum 0.9 --save "$RM"
expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --optimizer sgd --save "$RN"
usage_error "$RM: saved by a run with SGD momentum (its buffers are in the file); this run has --momentum 0" \
    -- train "$MODEL" --data synthetic --steps 3 --batch 16 --optimizer sgd --resume "$RM"
usage_error "$RN: saved by a run without momentum (--momentum 0), so it holds no momentum buffers" \
    -- train "$MODEL" --data synthetic --steps 3 --batch 16 --optimizer sgd --momentum 0.9 \
    --resume "$RN"
expect 0 "resuming $RM at step 2" -- train "$MODEL" --data synthetic --steps 3 --batch 16 \
    --optimizer sgd --momentum 0.5 --resume "$RM"
expect 0 "" -- train "$MODEL" --data synthetic --steps 3 --batch 16 --optimizer sgd \
    --momentum 0.9 --load "$RN"
usage_error "--batch 8193 is larger than the 8192 training samples" -- train "$MODEL" \
    --data synthetic --batch 8193 --steps 1
# ... before the plan: no memory advice for a batch the data cannot fill.
usage_error "brigade train: --batch 100000 is larger than the 8192 training samples" -- \
    train "$MODEL" --data synthetic --batch 100000 --steps 1 --device-mem 1G
check "a batch past the data: no memory advice" sh -c "! grep -q 'does not fit' '$ERR'"
usage_error "--data: empty (expected fashion-mnist, synthetic or a directory)" -- \
    train "$MODEL" --data "" --steps 1
# More steps than a run's epochs can hold: refused, not wrapped around.
usage_error "--steps 4611686018427387903 takes 288230376151711744 epochs of 8192 samples at batch 512; a run has at most 1000000" \
    -- train "$MODEL" --data synthetic --batch 512 --steps 4611686018427387903
# A resumed run continues the same one: same batch, same data, steps left.
usage_error "--resume: $R: the run was saved at --batch 16, this one has --batch 32" -- \
    train "$MODEL" --data synthetic --steps 6 --batch 32 --resume "$R"
# ... before the plan: the reason, not memory advice for a run refused anyway.
usage_error "--resume: $R: the run was saved at --batch 16, this one has --batch 4096" -- \
    train "$MODEL" --data synthetic --steps 6 --batch 4096 --resume "$R" --device-mem 10M
check "--resume at another batch: no memory advice" sh -c "! grep -q 'does not fit' '$ERR'"
mkdir -p "$T/fewer"
python3 - "$T/fewer" <<'PY'
import gzip, struct, sys
# 40 training and 8 test images of 28x28 (IDX), all labels 0.
for name, n in (("train", 40), ("t10k", 8)):
    with open("%s/%s-images-idx3-ubyte" % (sys.argv[1], name), "wb") as f:
        f.write(struct.pack(">IIII", 0x803, n, 28, 28) + bytes(n * 784))
    with open("%s/%s-labels-idx1-ubyte" % (sys.argv[1], name), "wb") as f:
        f.write(struct.pack(">II", 0x801, n) + bytes(n))
PY
usage_error "--resume: $R: the run was saved training on 8192 samples, this data has 40" \
    -- train "$MODEL" --data "$T/fewer" --steps 6 --batch 16 --resume "$R"
# Other data of as many samples (every training label changed): refused.
if expect 0 "" -- train "$MODEL" --data "$T/fewer" --steps 2 --batch 16 --save "$T/fewer.st"; then
    mkdir -p "$T/relabelled"
    cp "$T/fewer/"* "$T/relabelled/"
    python3 -c 'import struct, sys
open(sys.argv[1], "wb").write(struct.pack(">II", 0x801, 40) + bytes([1] * 40))' \
        "$T/relabelled/train-labels-idx1-ubyte"
    usage_error "--resume: $T/fewer.st: the run was saved training on other data of as many samples (CRC-32 of its images and labels " \
        -- train "$MODEL" --data "$T/relabelled" --steps 4 --batch 16 --resume "$T/fewer.st"
    expect 0 "resuming $T/fewer.st at step 2" -- train "$MODEL" --data "$T/fewer" --steps 4 \
        --batch 16 --resume "$T/fewer.st"
    # An evaluation of a file's weights on data read from files: no seed
    # made anything, and the metrics say null (they said 1).
    expect 0 "" -- train "$MODEL" --data "$T/fewer" --steps 0 --load "$T/fewer.st" \
        --metrics "$T/evaluated.json"
    file_check "an evaluation on files: seed null" "$T/evaluated.json" 'assert p["seed"] is None, p'
fi
# A line per tenth of an epoch, rounded up: 14 steps (40 samples at batch 3)
# print every second step, 7 lines (they printed all 14).
if expect 0 "" -- train "$MODEL" --data "$T/fewer" --epochs 1 --batch 3 --test-samples 8; then
    check "14 steps: 7 progress lines" sh -c "test \"\$(grep -c '^epoch 1/1 step' '$ERR')\" -eq 7"
    check "14 steps: the second is the first line" grep -q '^epoch 1/1 step 2/14 ' "$ERR"
fi
# An epoch's last batch (8 of the 40 samples at batch 16) holding fewer
# samples than the 12 micro-batches leaves 4 empty: said before the run and
# in the recorded summary (a tester found them drawn as empty ops, unsaid).
if expect 0 "note: an epoch's last batch holds 8 samples, which leaves 4 of the 12 micro-batches of its step empty (--microbatches 8 or fewer would not)" \
    -- train "$MODEL" --data "$T/fewer" --epochs 1 --batch 16 --microbatches 12 --devices cpu:2 \
    --test-samples 8; then
    stdout_has "(step 3 took an epoch's last batch, 8 of its 40 samples where the others take 16, 4 of its 12 micro-batches empty: a short step" \
        "the summary names the empty micro-batches"
fi
# ... not when the run ends before that batch, nor when it fills them.
if expect 0 "" -- train "$MODEL" --data "$T/fewer" --steps 2 --batch 16 --microbatches 12 \
    --test-samples 8; then
    check "no empty micro-batches in steps 1-2" sh -c "! grep -q 'empty' '$ERR'"
fi
if expect 0 "" -- train "$MODEL" --data "$T/fewer" --epochs 1 --batch 16 --microbatches 8 \
    --test-samples 8; then
    check "8 micro-batches for 8 samples: none empty" sh -c "! grep -q 'empty' '$ERR' '$OUT'"
fi
usage_error "nothing to do: --resume is at step 3 and this run ends at step 2" -- \
    train "$MODEL" --data synthetic --steps 2 --batch 16 --resume "$R"
if expect 0 "" -- train "$MODEL" --data synthetic --steps 5 --batch 16 --resume "$R"; then
    stdout_has "trained 2 steps (4 to 5 of the run) in" "a resumed run says which steps it ran"
fi
# The options that shape each update come from the command line: a run
# resumed without the saved run's schedule and clipping says so, and so
# does one that lengthens the run a moving rate's schedule spans; with the
# same options (a constant rate after warmup spans no length), nothing is
# said.
if expect 0 "" -- train "$MODEL" --data synthetic --steps 4 --batch 16 --lr-schedule cosine \
    --warmup 2 --clip-grad-norm 1 --save "$T/scheduled.st"; then
    expect 0 "note: $T/scheduled.st was saved by a run with adam lr 0.001, cosine to 0 over 4 steps, 2 warmup steps, clipping at norm 1; this one goes on with adam lr 0.001, so from step 5 it trains otherwise" \
        -- train "$MODEL" --data synthetic --steps 6 --batch 16 --resume "$T/scheduled.st"
    expect 0 "note: $T/scheduled.st was saved by a run with adam lr 0.001, cosine to 0 over 4 steps, 2 warmup steps, clipping at norm 1; this one goes on with adam lr 0.001, cosine to 0 over 6 steps, 2 warmup steps, clipping at norm 1, so from step 5" \
        -- train "$MODEL" --data synthetic --steps 6 --batch 16 --lr-schedule cosine \
        --warmup 2 --clip-grad-norm 1 --resume "$T/scheduled.st"
fi
if expect 0 "" -- train "$MODEL" --data synthetic --steps 4 --batch 16 --warmup 2 \
    --clip-grad-norm 1 --save "$T/warmed.st"; then
    expect 0 "" -- train "$MODEL" --data synthetic --steps 6 --batch 16 --warmup 2 \
        --clip-grad-norm 1 --resume "$T/warmed.st"
    check "no note when the resumed run has the saved run's options" \
        test "$(grep -c '^note: ' "$ERR")" -eq 0
fi
# Synthetic data are made from the seed: a resumed run takes the saved one
# (and continues bit for bit), and refuses another.
if expect 0 "" -- train "$MODEL" --data synthetic --steps 4 --batch 16 --seed 3 \
    --save "$T/seed3.st"; then
    usage_error "--resume: $T/seed3.st: the run was saved with --seed 3, this one has --seed 5" -- \
        train "$MODEL" --data synthetic --steps 6 --batch 16 --resume "$T/seed3.st" --seed 5
    expect 0 "" -- train "$MODEL" --data synthetic --steps 6 --batch 16 --resume "$T/seed3.st" \
        --metrics "$T/resumed3.json"
    expect 0 "" -- train "$MODEL" --data synthetic --steps 6 --batch 16 --seed 3 \
        --metrics "$T/straight3.json"
    check "a resumed run without --seed continues on the saved seed's data" python3 -c "
import json, sys
a, b = (json.load(open(f)) for f in sys.argv[1:])
assert a['seed'] == 3 and a['loss'] == b['loss'] and a['test_loss'] == b['test_loss'], (a, b)" \
        "$T/resumed3.json" "$T/straight3.json"
fi
# SIGTERM, SIGINT or SIGHUP (the session went away) stops a run after the
# step in progress: the state is saved, the message says where, the exit
# status is 128 + the signal, and the run goes on from there.
# signal_when PATTERN SIGNAL PID: once stderr has a line matching PATTERN
# (a minute at most), sends SIGNAL to PID and waits for it to end (a
# minute at most, then SIGKILL); its exit status in $status.
signal_when() {
    tries=0
    while ! grep -q "$1" "$ERR" && [ $tries -lt 600 ]; do
        sleep 0.1
        tries=$((tries + 1))
    done
    kill -"$2" "$3"
    tries=0
    while kill -0 "$3" 2>/dev/null && [ $tries -lt 600 ]; do
        sleep 0.1
        tries=$((tries + 1))
    done
    if kill -0 "$3" 2>/dev/null; then
        kill -KILL "$3"
        fail "SIG$2: $3 did not stop within 60 s"
    fi
    wait "$3"
    status=$?
}
# The run starts with the signal's default action: under nohup (SIGHUP
# ignored, and so inherited) brigade rightly leaves an ignored signal
# ignored, and the test would wait for nothing.
stop_run() { # SIGNAL STATUS
    : >"$ERR" # emptied here: the child's redirection may come after the first look
    env --default-signal="$1" "$BRIGADE" train "$MODEL" --data synthetic --steps 1000000 \
        --batch 16 --save "$T/stopped.st" </dev/null >"$OUT" 2>"$ERR" &
    signal_when "^epoch 1/" "$1" $!
    check "SIG$1: exit status $2 (was $status)" test "$status" -eq "$2"
    # shellcheck disable=SC2016 # the script's own $1, given after it
    check "SIG$1: answered at once, before the run stops" sh -c '
        heard=$(grep -n "^brigade train: stopping once the step or the evaluation in progress ends" "$1" | cut -d: -f1)
        stopped=$(grep -n "interrupted after step" "$1" | cut -d: -f1)
        [ -n "$heard" ] && [ -n "$stopped" ] && [ "$heard" -lt "$stopped" ]' sh "$ERR"
    # Its newline ends a progress bar's line on a terminal; into a file it
    # made a blank line (until 2026-12-05).
    # shellcheck disable=SC2016 # the script's own $1, given after it
    check "SIG$1: no blank line before the answer in a file" \
        sh -c '! grep -B1 "^brigade train: stopping once" "$1" | grep -qx ""' sh "$ERR"
    stopped=$(sed -n 's/.*interrupted after step \([0-9]*\) of 1000000; the training state is saved in .*/\1/p' "$ERR")
    if [ -n "$stopped" ]; then
        pass
        expect 0 "resuming $T/stopped.st at step $stopped" -- train "$MODEL" --data synthetic \
            --steps $((stopped + 1)) --batch 16 --resume "$T/stopped.st"
    else
        fail "SIG$1: no 'interrupted after step N ... saved' message"
    fi
}
stop_run TERM 143
stop_run HUP 129
# signal_twice GAP PID COMMAND...: once COMMAND succeeds (a minute at
# most), sends SIGTERM to PID and another GAP seconds later, and waits for
# it; its exit status in $status.
signal_twice() {
    gap=$1 pid=$2
    shift 2
    tries=0
    while ! "$@" && [ $tries -lt 600 ]; do
        sleep 0.1
        tries=$((tries + 1))
    done
    kill -TERM "$pid"
    sleep "$gap"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    status=$?
}
# A second signal a second after the first quits at once, saying what
# --save holds: here the run's last step, saved before the final
# evaluation that the first signal would have let end (a model whose
# evaluation of 2,048 samples takes seconds). Until 2026-12-05 it said
# only that nothing more is written.
printf '%s\n' 'input channels=1 height=28 width=28' 'conv2d filters=64 kernel=3 activation=relu' \
    'conv2d filters=128 kernel=3 activation=relu' flatten 'dense units=10' \
    softmax_cross_entropy >"$T/slow_eval.model"
: >"$ERR"
env --default-signal=TERM "$BRIGADE" train "$T/slow_eval.model" --data synthetic --steps 2 \
    --batch 16 --save "$T/quit.st" </dev/null >"$OUT" 2>"$ERR" &
signal_twice 1.2 $! grep -q "step 2/2 .*(done)" "$ERR"
check "a second signal: exit status 143 (was $status)" test "$status" -eq 143
check "a second signal: says what --save holds" grep -qxF \
    "brigade train: a second signal: quitting at once; nothing more is written; $T/quit.st holds step 2, the run's last" \
    "$ERR"
expect 0 "" -- train "$T/slow_eval.model" --data synthetic --steps 0 --load "$T/quit.st" \
    --test-samples 16
# A repeat within the second is the same request, and is answered so
# (until 2026-12-05 it went unanswered, and a tester took the run for deaf);
# the stopped run then says that --metrics was not written, where an
# earlier run's file stays.
echo earlier >"$T/repeat.json"
: >"$ERR"
env --default-signal=TERM "$BRIGADE" train "$T/slow_eval.model" --data synthetic --steps 4 \
    --batch 1024 --metrics "$T/repeat.json" --test-samples 16 </dev/null >"$OUT" 2>"$ERR" &
signal_twice 0.2 $! grep -q " step 1/4 " "$ERR"
check "a repeat within the second: the run stops as asked first (exit $status)" \
    test "$status" -eq 143
check "a repeat within the second: the run stopped as asked, not quit" \
    grep -q "^brigade train: interrupted after step " "$ERR"
check "a repeat within the second: answered" grep -qxF \
    "brigade train: already stopping (a signal within a second of the first is the same request); a signal a second or more after it quits at once" \
    "$ERR"
check "an interrupted run: --metrics not written, said" grep -qxF \
    "brigade train: the run was interrupted, so --metrics $T/repeat.json was not written (the file there is an earlier run's)" \
    "$ERR"
check "an interrupted run: the earlier --metrics file stays" grep -qx earlier "$T/repeat.json"
# A signal during the run's last step stops the run after it and its
# save, before the test set's evaluation, as during any other step (until
# 2026-12-06 the evaluation ran, and the answer's "once the step ... ends"
# was not kept).
: >"$ERR"
env --default-signal=TERM "$BRIGADE" train "$T/slow_eval.model" --data synthetic --steps 2 \
    --batch 1024 --save "$T/last-step.st" --test-samples 16 </dev/null >"$OUT" 2>"$ERR" &
signal_when " step 1/2 " TERM $! # step 2 of seconds under way
check "SIGTERM in the last step: exit status 143 (was $status)" test "$status" -eq 143
check "SIGTERM in the last step: stopped before the evaluation, said" grep -qxF \
    "brigade train: interrupted after step 2 of 2, the run's last, before the test set's evaluation; the training state is saved in $T/last-step.st (--steps 0 --load $T/last-step.st scores it)" \
    "$ERR"
check "SIGTERM in the last step: the test set is not scored" sh -c "! grep -q 'test accuracy' '$OUT'"
expect 0 "" -- train "$T/slow_eval.model" --data synthetic --steps 0 --load "$T/last-step.st" \
    --test-samples 16
stdout_has "evaluated the weights of $T/last-step.st" "the last step's save, scored"
# A signal once the run is over, while its reports are written (here a
# trace of some 20 MB), is answered and waits for them and the results
# (until 2026-12-06 the handlers were gone by then: the process ended at
# once, silently, its results and reports lost).
printf '%s\n' 'input channels=1 height=28 width=28' flatten 'dense units=32 activation=relu' \
    'dense units=10' softmax_cross_entropy >"$T/late.model"
rm -f "$T/late.json" "$T/late-metrics.json"
: >"$ERR"
env --default-signal=TERM "$BRIGADE" train "$T/late.model" --data synthetic --devices cpu:4 \
    --microbatches 64 --batch 64 --steps 100 --record-steps 100 --test-samples 64 \
    --trace "$T/late.json" --metrics "$T/late-metrics.json" </dev/null >"$OUT" 2>"$ERR" &
late=$!
tries=0 # (a temporary file also tries the folder before the run: after the run's end here)
until grep -q " step 100/100 .*(done)" "$ERR" || [ $tries -gt 600 ]; do
    sleep 0.1
    tries=$((tries + 1))
done
tries=0
until set -- "$T"/late.json.tmp.* && [ -e "$1" ] || [ $tries -gt 600000 ]; do
    tries=$((tries + 1)) # a busy wait: the write takes a second or so
done
kill -TERM $late
wait $late
status=$?
check "SIGTERM while the reports are written: exit status 143 (was $status)" \
    test "$status" -eq 143
check "SIGTERM while the reports are written: answered" grep -qxF \
    "brigade train: stopping once the results are printed and the reports written; a second signal a second from now quits at once" \
    "$ERR"
check "SIGTERM while the reports are written: the results printed" grep -q "^test accuracy: " "$OUT"
check "SIGTERM while the reports are written: the trace written" grep -qxF \
    "trace written to $T/late.json" "$ERR"
check "SIGTERM while the reports are written: the metrics written" python3 -c "
import json, sys
m = json.load(open(sys.argv[1]))
assert m['steps'] == 100, m['steps']" "$T/late-metrics.json"
# Mid-run, within a step of 1,024 samples (seconds), the last save is
# told, with how to go on from it.
: >"$ERR"
env --default-signal=TERM "$BRIGADE" train "$T/slow_eval.model" --data synthetic --steps 4 \
    --batch 1024 --save "$T/quit-mid.st" --save-every 1 --test-samples 16 </dev/null >"$OUT" \
    2>"$ERR" &
# (Once step 1's progress line is out, its save is done: the file is there
# at its rename, still inside the save, where a signal stops the run after
# it, before the second.)
signal_twice 1.2 $! grep -q " step 1/4 " "$ERR"
check "a second signal mid-run: exit status 143 (was $status)" test "$status" -eq 143
check "a second signal mid-run: says the step --save holds and how to go on" grep -qxF \
    "brigade train: a second signal: quitting at once; nothing more is written; $T/quit-mid.st holds step 1 (--resume $T/quit-mid.st goes on from there)" \
    "$ERR"
# Before the run's first save: nothing of it is saved, and a file that was
# there is as it was (until 2026-12-05 the answer said nothing of --save,
# so a file of another run could be taken for this one's).
for pre in absent present; do
    rm -f "$T/quit-pre.st"
    if [ $pre = present ]; then cp "$T/quit.st" "$T/quit-pre.st"; fi
    : >"$ERR"
    env --default-signal=TERM "$BRIGADE" train "$T/slow_eval.model" --data synthetic --steps 4 \
        --batch 1024 --save "$T/quit-pre.st" --test-samples 16 </dev/null >"$OUT" 2>"$ERR" &
    signal_twice 1.2 $! grep -q " step 1/4 " "$ERR" # step 2 of seconds under way
    check "a second signal before a save ($pre): exit status 143 (was $status)" \
        test "$status" -eq 143
    if [ $pre = present ]; then
        check "a second signal before a save: the file there is as it was" grep -qxF \
            "brigade train: a second signal: quitting at once; nothing more is written; nothing of this run is saved, and $T/quit-pre.st is as it was before it" \
            "$ERR"
        check "a second signal before a save: the file is untouched" cmp -s "$T/quit.st" \
            "$T/quit-pre.st"
    else
        check "a second signal before a save: nothing is saved" grep -qxF \
            "brigade train: a second signal: quitting at once; nothing more is written; nothing of this run is saved" \
            "$ERR"
        check "a second signal before a save: no file" test ! -e "$T/quit-pre.st"
    fi
done
# A stop whose save fails (the file over ulimit -f) ends the run as the
# signal asked, with why the save failed, without scoring the test set or
# writing --metrics (until 2026-12-04 it scored the whole test set first and
# wrote metrics of part of the run).
: >"$ERR"
(
    ulimit -f 64
    exec env --default-signal=TERM "$BRIGADE" train "$MODEL" --data synthetic --steps 1000000 \
        --batch 16 --save "$T/stop-limited.st" --metrics "$T/stop-limited.json"
) </dev/null >"$OUT" 2>"$ERR" &
signal_when "^epoch 1/" TERM $!
check "SIGTERM, save failed: exit status 143 (was $status)" test "$status" -eq 143
check "SIGTERM, save failed: why, and that nothing is saved" grep -qE \
    "^brigade train: interrupted by signal 15 \(Terminated\) after step [0-9]+ of 1000000, whose training state was not saved: cannot write '$T/stop-limited.st': write: File too large; nothing of this run is saved" \
    "$ERR"
check "SIGTERM, save failed: the test set is not scored" sh -c "! grep -q 'test accuracy' '$OUT'"
check "SIGTERM, save failed: no metrics" test ! -e "$T/stop-limited.json"
# simulate, which ends at once on a stop signal, removes first the
# temporary file of the trace it is writing (until 2026-12-06 a TERM sent
# then left it, its size, beside the file it was to replace).
rm -f "$T"/stopped-trace.json*
env --default-signal=TERM "$BRIGADE" simulate "$ROOT/examples/mlp_balanced.model" \
    --devices cpu:4 --microbatches 64 --steps 300 --trace "$T/stopped-trace.json" \
    </dev/null >"$OUT" 2>"$ERR" &
writer=$!
tries=0 # (the folder's check before the run makes an empty one)
until [ -n "$(find "$T" -maxdepth 1 -name 'stopped-trace.json.tmp.*' -size +1M)" ] ||
    [ $tries -gt 6000 ]; do
    sleep 0.01
    tries=$((tries + 1))
done
kill -TERM $writer
wait $writer
status=$?
check "simulate, TERM while writing its trace: exit status 143 (was $status)" \
    test "$status" -eq 143
check "simulate, TERM while writing its trace: no temporary file left" \
    sh -c "! find '$T' -maxdepth 1 -name 'stopped-trace.json.tmp.*' | grep -q ."
check "simulate, TERM while writing its trace: no trace" test ! -e "$T/stopped-trace.json"
stdout_has "simulated: " "simulate, TERM while writing its trace: the summary printed before"
# A sweep stops after the point in progress, says how far it got, and
# draws the chart of the points done (SIGTERM: a background job of a script
# ignores SIGINT).
: >"$ERR"
"$BRIGADE" sweep "$MODEL" --devices cpu:2 --microbatches 1,2,4,8,16 --schedule gpipe,1f1b \
    --steps 200 --chart "$T/interrupted.svg" --metrics "$T/interrupted.json" \
    </dev/null >"$OUT" 2>"$ERR" &
signal_when "^\[2/10\]" TERM $!
check "sweep, SIGTERM: exit status 143 (was $status)" test "$status" -eq 143
check "sweep, SIGTERM: answered at once" \
    grep -q "^brigade sweep: stopping once the point in progress ends" "$ERR"
check "sweep, SIGTERM: says how far it got" \
    grep -qE "^brigade sweep: interrupted after [2-9] of 10 points; the chart and metrics have those done" "$ERR"
check "sweep, SIGTERM: the chart of the points done" grep -q '<circle class="point"' \
    "$T/interrupted.svg"
check "sweep, SIGTERM: the metrics of the points done, and the signal" python3 -c '
import json, re, sys
p = json.load(open(sys.argv[1]))
done = int(re.search(r"interrupted after ([0-9]+) of", open(sys.argv[2]).read()).group(1))
assert p["complete"] is False and p["stop_signal"] == 15, p
assert [(q["schedule"], q["microbatches"]) for q in p["points"]] == [
    ("gpipe", m) for m in (1, 2, 4, 8, 16)][:done], (done, p["points"])' \
    "$T/interrupted.json" "$ERR"
# A closed pipe (| head) loses the output, not the run: it ends and saves.
rm -f "$T/piped.st"
"$BRIGADE" train "$MODEL" --data synthetic --steps 40 --batch 16 --save "$T/piped.st" 2>&1 |
    head -1 >/dev/null
expect 2 "nothing to do: --resume is at step 40" -- train "$MODEL" --data synthetic --steps 40 \
    --batch 16 --resume "$T/piped.st"
# Closed before the first line, too.
"$BRIGADE" train "$MODEL" --data synthetic --steps 40 --batch 16 --save "$T/piped2.st" 2>&1 | true
expect 2 "nothing to do: --resume is at step 40" -- train "$MODEL" --data synthetic --steps 40 \
    --batch 16 --resume "$T/piped2.st"
# Its messages lost (standard error alone into the pipe, or closed): the
# run still ends and saves, but does not say it succeeded (until 2026-12-04
# it exited 0).
{
    "$BRIGADE" train "$MODEL" --data synthetic --steps 40 --batch 16 2>&1 >/dev/null
    echo $? >"$T/status"
} | true
check "train 2>&1 >/dev/null | true: exit status 1 (was $(cat "$T/status"))" \
    test "$(cat "$T/status")" -eq 1
"$BRIGADE" train "$MODEL" --data synthetic --steps 40 --batch 16 --save "$T/piped3.st" \
    >/dev/null 2>&-
status=$?
check "train 2>&-: exit status 1 (was $status)" test "$status" -eq 1
# Saved all the same, and whole: a closed descriptor is filled (/dev/full)
# before any file is opened, so no file takes its number and the messages.
expect 2 "nothing to do: --resume is at step 40" -- train "$MODEL" --data synthetic --steps 40 \
    --batch 16 --resume "$T/piped3.st"
"$BRIGADE" summary "$MODEL" >/dev/null 2>&-
status=$?
check "summary 2>&- with nothing to say: exit status 0 (was $status)" test "$status" -eq 0
# A sweep too: the table is lost, the points are not (chart and metrics).
rm -f "$T/piped_sweep.json" "$T/piped_sweep.svg"
"$BRIGADE" sweep "$MODEL" --simulate --devices cpu:2 --microbatches 1,2,4,8 \
    --metrics "$T/piped_sweep.json" --chart "$T/piped_sweep.svg" 2>"$ERR" | true
check "sweep into a closed pipe: every point in the metrics" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
assert p["complete"] is True and [q["microbatches"] for q in p["points"]] == [1, 2, 4, 8], p' \
    "$T/piped_sweep.json"
check "sweep into a closed pipe: the chart" test -s "$T/piped_sweep.svg"
check "sweep into a closed pipe: says the table was not written, and why" \
    grep -qFx "brigade sweep: cannot write the standard output: Broken pipe" "$ERR"
# simulate ends by SIGPIPE, as other tools do (main.c's help), but only once
# every file is written (until 2026-12-06 it wrote the first and lost the
# others). The reader is gone before it writes a line.
rm -f "$T"/piped_sim.*
into_closed_pipe "$T/status" "$BRIGADE" simulate "$MODEL" --devices cpu:2 --microbatches 4 \
    --metrics "$T/piped_sim.json" --trace "$T/piped_sim.trace.json" --timeline "$T/piped_sim.svg"
check "simulate into a closed pipe: ended by SIGPIPE (exit status $(cat "$T/status"))" \
    test "$(cat "$T/status")" -eq 141
check "simulate into a closed pipe: all three files written" \
    test -s "$T/piped_sim.json" -a -s "$T/piped_sim.trace.json" -a -s "$T/piped_sim.svg"
# Another tool's file (no brigade metadata) is weights at most.
python3 - "$T/foreign.safetensors" <<'PY'
import json, struct, sys
header = json.dumps({"x": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}).encode()
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header + bytes(4))
PY
usage_error "$T/foreign.safetensors: holds weights only, not a training state to resume (use --load)" \
    -- train "$MODEL" --data synthetic --steps 5 --batch 16 --resume "$T/foreign.safetensors"
# An empty one (a header of {}) holds nothing at all.
python3 -c 'import struct, sys; open(sys.argv[1], "wb").write(struct.pack("<Q", 2) + b"{}")' \
    "$T/empty.safetensors"
usage_error "$T/empty.safetensors: holds no tensors, not a training state to resume" \
    -- train "$MODEL" --data synthetic --steps 5 --batch 16 --resume "$T/empty.safetensors"
# A file an option names that cannot be read: the message leads with the
# option (until 2026-12-04 it named the file alone).
usage_error "brigade train: --resume: cannot read '$T/none.st': No such file or directory" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --resume "$T/none.st"
usage_error "brigade train: --load: cannot read '$T': a directory, not a regular file" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --load "$T"
usage_error "brigade plan: --profile: cannot read '$T/none.json': No such file or directory" -- \
    plan "$MODEL" --devices cpu:2 --profile "$T/none.json"
# A checkpoint is read by its size: a device or a folder is named as such.
usage_error "cannot read '/dev/zero': a device or a pipe, not a regular file" -- \
    train "$MODEL" --data synthetic --steps 1 --load /dev/zero
usage_error "cannot read '$T': a directory, not a regular file" -- \
    train "$MODEL" --data synthetic --steps 1 --resume "$T"
# A FIFO with no writer is refused at once, not waited on (a wait would
# hold this test until meson stops it).
if mkfifo "$T/fifo.safetensors"; then
    usage_error "cannot read '$T/fifo.safetensors': a device or a pipe, not a regular file" -- \
        train "$MODEL" --data synthetic --steps 0 --load "$T/fifo.safetensors"
fi
# A report into a FIFO that no process reads fails (exit 1) rather than
# waiting forever at the run's end; with a reader it is written into.
if mkfifo "$T/report.fifo"; then
    expect 1 "metrics: cannot write '$T/report.fifo': it is a FIFO that no process reads (start its reader first)" \
        -- train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics "$T/report.fifo"
    # Two reports into one FIFO: its reader takes the first and ends.
    usage_error "--metrics and --trace both name '$T/report.fifo': each output needs a file of its own" \
        -- train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics "$T/report.fifo" \
        --trace "$T/report.fifo"
    # The reader opens the FIFO without waiting for a writer, says so, and
    # reads until the writer closes it (or 120 s pass): no race with the
    # run, and no reader left waiting when the run fails.
    rm -f "$T/reader.ready"
    python3 -c '
import os, sys, time
fifo, ready, out = sys.argv[1:4]
fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
open(ready, "w").close()
data, deadline = b"", time.time() + 120
while time.time() < deadline:
    try:
        chunk = os.read(fd, 65536)
    except BlockingIOError:
        chunk = None
    if chunk:
        data += chunk
    elif chunk == b"" and data:
        break
    else:
        time.sleep(0.01)
open(out, "wb").write(data)' "$T/report.fifo" "$T/reader.ready" "$T/report.read" &
    reader=$!
    wait_for "$T/reader.ready"
    expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics "$T/report.fifo"
    wait "$reader"
    check "a FIFO with a reader gets the metrics" grep -qF '"steps":' "$T/report.read"
fi
usage_error "--save-every needs --save FILE to write to" -- train "$MODEL" --data synthetic \
    --steps 2 --save-every 1
usage_error "--save run.JSON: this is a safetensors checkpoint; name it .safetensors (a .json name is for a JSON output, such as --metrics)" \
    -- train "$MODEL" --data synthetic --steps 1 --save run.JSON
usage_error "--save run.svg: this is a safetensors checkpoint; name it .safetensors (a .svg name is for an SVG picture)" \
    -- train "$MODEL" --data synthetic --steps 1 --save run.svg
# A save every N steps in a run that ends by step N changes nothing: --save
# writes at the end anyway (after the data set is found: 2 steps an epoch).
usage_error "--save-every 2: this run ends at step 2, where --save writes anyway" -- \
    train "$MODEL" --data synthetic --steps 2 --save "$T/every.safetensors" --save-every 2
usage_error "--save-every 2: this run ends at step 2, where --save writes anyway" -- \
    train "$MODEL" --data synthetic --epochs 1 --batch 4096 --save "$T/every.safetensors" \
    --save-every 2
# A resumed run is given the command that started it: with no save of
# --save-every left before its end, it is not refused for that.
if expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --save "$T/at2.st"; then
    expect 0 "" -- train "$MODEL" --data synthetic --steps 4 --batch 16 --resume "$T/at2.st" \
        --save "$T/at2.st" --save-every 2
fi

# A file past the size limit (ulimit -f) is a write error, named, not a
# process ended by SIGXFSZ; nothing is left behind.
(
    ulimit -f 1
    exec "$BRIGADE" train "$MODEL" --data synthetic --steps 1 --batch 16 --save "$T/limited.st"
) >"$OUT" 2>"$ERR"
status=$?
check "ulimit -f: exit status 1 (was $status)" test "$status" -eq 1
check "ulimit -f: the write is named" grep -qF "cannot write '$T/limited.st': write: File too large" "$ERR"
check "ulimit -f: no temporary file left" sh -c "! ls '$T'/limited.st* 2>/dev/null"
# A save that fails stops the run after its step, whose results are still
# made: the test set scored, the metrics written (they fit the limit, the
# checkpoint does not), then the failure with what the file holds.
(
    ulimit -f 64
    exec "$BRIGADE" train "$MODEL" --data synthetic --steps 6 --batch 16 --save "$T/limited.st" \
        --save-every 1 --metrics "$T/limited.json" --timeline "$T/limited.svg"
) >"$OUT" 2>"$ERR"
status=$?
check "a failed --save-every: exit status 1 (was $status)" test "$status" -eq 1
check "a failed --save-every: where the run stopped, why, and what is saved" grep -qF \
    "brigade train: stopped after step 1 of 6, whose training state was not saved: cannot write '$T/limited.st': write: File too large; nothing of this run is saved" "$ERR"
stdout_has "trained 1 step in " "a failed --save-every: the steps done"
check "a failed --save-every: no timeline of steps never recorded, and why" grep -qF \
    "note: no step was recorded (the run stopped at step 1, before its last 3), so --timeline is not written" "$ERR"
check "a failed --save-every: no timeline file" test ! -e "$T/limited.svg"
stdout_has "test accuracy: " "a failed --save-every: the test set is scored"
check "a failed --save-every: the metrics say so" python3 -c '
import json, sys
m = json.load(open(sys.argv[1]))
assert (m["steps"], m["saved_step"], m["save_failed_step"]) == (1, 0, 1), m
assert "File too large" in m["save_error"]' "$T/limited.json"
(
    ulimit -f 64
    exec "$BRIGADE" train "$MODEL" --data synthetic --steps 2 --batch 16 --save "$T/limited.st"
) >"$OUT" 2>"$ERR"
status=$?
check "a failed final --save: exit status 1 (was $status)" test "$status" -eq 1
check "a failed final --save: named as the final state" grep -qF \
    "brigade train: the final training state (step 2) was not saved: cannot write" "$ERR"
stdout_has "trained 2 steps in " "a failed final --save: the steps done"
# Resumed into its own file, which a failed save leaves whole: said.
expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --save "$T/own.st"
(
    ulimit -f 64
    exec "$BRIGADE" train "$MODEL" --data synthetic --steps 4 --batch 16 --resume "$T/own.st" \
        --save "$T/own.st"
) >"$OUT" 2>"$ERR"
check "a failed save into the --resume file: what it still holds" grep -qF \
    "was not saved: cannot write '$T/own.st': write: File too large; $T/own.st still holds step 2, which this run resumed from" \
    "$ERR"
expect 0 "resuming $T/own.st at step 2" -- train "$MODEL" --data synthetic --steps 3 --batch 16 \
    --resume "$T/own.st"

# The outputs written after (or during) the run are checked before it: a
# usage error naming the option, the path and the reason, with nothing
# trained or printed.
usage_error "--save: cannot write '$T/no/d/W.safetensors': folder '$T/no/d': No such file or directory" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --save "$T/no/d/W.safetensors"
check "an unwritable --save stops before training" test ! -s "$OUT"
usage_error "--save: empty file name" -- train "$MODEL" --data synthetic --steps 1 --save ""
usage_error "--resume: empty file name" -- train "$MODEL" --data synthetic --steps 1 --resume ""
usage_error "--load: empty file name" -- train "$MODEL" --data synthetic --steps 1 --load ""
# --test-samples the size of the set scores the whole set, said as such.
expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --test-samples 2048
check "--test-samples N of N: no 'first N of N'" sh -c "! grep -q 'the first 2048' '$OUT'"
stdout_has "test accuracy: " "--test-samples N of N: the test set scored"
# A checkpoint replaces its file whole: a link there would become a file.
ln -s "$T/target.safetensors" "$T/link.safetensors"
usage_error "--save: '$T/link.safetensors' is a symbolic link; the file is replaced whole" -- \
    train "$MODEL" --data synthetic --steps 1 --save "$T/link.safetensors"
usage_error "--save: '/dev/null' is not a regular file" -- \
    train "$MODEL" --data synthetic --steps 1 --save /dev/null
usage_error "--trace: cannot write '$T/no/d/T.json': folder '$T/no/d': No such file or directory" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --trace "$T/no/d/T.json"
usage_error "--timeline: cannot write '$T/no/d/T.svg': folder '$T/no/d': No such file or directory" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --timeline "$T/no/d/T.svg"
usage_error "--metrics: cannot write '$T/no/such/dir/M.json': folder '$T/no/such/dir': No such file or directory" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics "$T/no/such/dir/M.json"
usage_error "--metrics: '$T' is a directory" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics "$T"
# A folder that takes no files whatever its permission bits say (procfs,
# for root too), and a link to nothing: refused before the run, not after.
usage_error "--metrics: cannot write '/proc/M.json': no new file can be made in folder '/proc'" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics /proc/M.json
usage_error "-o: cannot write '/proc/P.json': no new file can be made in folder '/proc'" -- \
    profile "$MODEL" -o /proc/P.json
ln -s "$T/no/such/target" "$T/dangling"
usage_error "--trace: cannot write '$T/dangling': folder '$T/no/such'" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --trace "$T/dangling"
# A link to a file not made yet is written through, as a shell would.
ln -s later.json "$T/ahead"
expect 0 "" -- train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics "$T/ahead"
check "--metrics through a link makes the file it names" test -s "$T/later.json"
# A name the folder takes, but not with the temporary file's suffix that
# replacing it whole adds: refused before the run too.
LONG=$(printf '%0250d' 0)
usage_error "--metrics: cannot write '$T/$LONG.json': a name of 255 bytes is too long in folder '$T', where the temporary file written first adds 11 to it; at most 244 bytes" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics "$T/$LONG.json"
if find "$T" -maxdepth 1 -name "*.tmp.*" | grep -q .; then fail "the folder check leaves no file behind"; else pass; fi
usage_error "--trace: empty file name" -- \
    train "$MODEL" --data synthetic --steps 1 --batch 16 --trace ""
# One file for two outputs, or an output that is an input: refused before
# the run (the later write would replace the other file, or what was read),
# under any spelling of the path and through a hard link. Resuming from a
# file and saving back to it is the one pair allowed.
usage_error "--save '$T/twice.out' and --metrics '$T/./twice.out' are one file: each output needs a file of its own" \
    -- train "$MODEL" --data synthetic --steps 1 --batch 16 --save "$T/twice.out" \
    --metrics "$T/./twice.out"
check "two outputs on one file: nothing written" test ! -e "$T/twice.out"
usage_error "--trace '$T/q.out' and --timeline '$T/../" -- simulate "$MODEL" --trace "$T/q.out" \
    --timeline "$T/../$(basename "$T")/q.out"
# A link to no file yet is the file it names; a device may take both.
ln -s linked.json "$T/to-linked"
usage_error "--metrics '$T/to-linked' and --trace '$T/linked.json' are one file" -- simulate "$MODEL" \
    --metrics "$T/to-linked" --trace "$T/linked.json"
expect 0 "" -- simulate "$MODEL" --metrics /dev/null --trace /dev/null
# /dev/stdout, with standard output redirected to a file by '>' (as the
# harness does): the report, then the metrics, alone to the end, neither
# written over the other (a second open of the file would start again at
# its first byte); the line saying where they went is on stderr.
if expect 0 "" -- simulate "$MODEL" --metrics /dev/stdout; then
    stdout_has "bubble: simulated" "simulate --metrics /dev/stdout: the report"
    check "simulate --metrics /dev/stdout: the whole metrics after the report" python3 -c '
import json, sys
text = open(sys.argv[1]).read()
at = text.index("{")
assert "bubble: simulated" in text[:at], text[:at]
metrics, end = json.JSONDecoder().raw_decode(text[at:])
assert metrics["model"].endswith("fashion_cnn.model"), metrics
assert text[at + end:].strip() == "", text[at + end:]' "$OUT"
    stderr_has "metrics written to /dev/stdout" "simulate --metrics /dev/stdout: where they went"
fi
# An output named as the file standard output goes to would replace the
# report: refused before the run.
# shellcheck disable=SC2094 # the one file on purpose
"$BRIGADE" simulate "$MODEL" --metrics "$T/same.json" >"$T/same.json" 2>"$ERR"
status=$?
check "--metrics over the file stdout goes to: exit 2 (was $status)" test "$status" -eq 2
stderr_has "--metrics '$T/same.json' is the file standard output goes to: replacing it would lose what that holds" \
    "--metrics over the file stdout goes to: said"
# A model file whose name is not UTF-8, or holds a control character: the
# JSON and SVG written still parse, each such byte U+FFFD.
odd_name=$(printf '%s/odd\377\001.model' "$T")
cp "$MODEL" "$odd_name"
if expect 0 "" -- sweep "$odd_name" --simulate --microbatches 1,2 --devices cpu:2 \
    --chart "$T/odd.svg" --metrics "$T/odd.json"; then
    check "a file name not UTF-8: the sweep's metrics and chart parse" python3 -c '
import json, sys, xml.etree.ElementTree as ET
model = json.load(open(sys.argv[1], encoding="utf-8"))["model"]
assert model.endswith("/odd\ufffd\x01.model"), repr(model)
ET.parse(sys.argv[2])
assert "odd\ufffd\ufffd.model" in open(sys.argv[2], encoding="utf-8").read()' "$T/odd.json" "$T/odd.svg"
fi
# An error naming such a file shows its control characters as \xNN: an
# escape sequence in a name does not act on the terminal.
esc_name=$(printf '%s/esc\033[31m.model' "$T")
usage_error "cannot read '$T/esc\\x1b[31m.model': No such file or directory" -- plan "$esc_name"
check "an escape sequence in a name: no ESC byte on stderr" sh -c "! grep -q \"$(printf '\033')\" '$ERR'"
# A newline in a name is shown as \x0a: the message stays one line (until
# 2026-12-05 the library's messages kept newlines, for a stall's flight
# recorder, which is now a detail said apart).
nl_name=$(printf '%s/nl\nl.model' "$T")
printf 'bogus\n' >"$nl_name"
usage_error "$T/nl\\x0al.model:1:1: unknown layer 'bogus'" -- summary "$nl_name"
check "a newline in a name: the message on one line" test "$(wc -l <"$ERR")" -eq 1
# C1's CSI in UTF-8 (C2 9B), which a terminal takes as ESC [, too.
csi_name=$(printf '%s/csi\302\23331m.model' "$T")
usage_error "cannot read '$T/csi\\xc2\\x9b31m.model': No such file or directory" -- plan "$csi_name"
check "a C1 escape in a name: not on stderr" sh -c "! grep -q \"$(printf '\302\233')\" '$ERR'"
cp "$MODEL" "$csi_name"
if expect 0 "" -- simulate "$csi_name"; then
    stdout_has "simulation of $T/csi\xc2\x9b31m.model: " "a C1 escape in a name: the header"
fi
# And a stray byte 9B (no UTF-8), CSI to a Latin-1 terminal; an é beside it
# is a character, shown as it is.
raw_name=$(printf '%s/raw\233\303\251.model' "$T")
usage_error "cannot read '$T/raw\\x9b$(printf '\303\251').model': No such file or directory" \
    -- plan "$raw_name"
# So do the headers and notes that name it (a newline too: one line each).
cp "$MODEL" "$esc_name"
if expect 0 "" -- simulate "$esc_name" --metrics "$esc_name.json"; then
    stdout_has "simulation of $T/esc\x1b[31m.model: " "an escape sequence in a name: the header"
    stderr_has "metrics written to $T/esc\x1b[31m.model.json" "an escape sequence in a name: the note"
    check "an escape sequence in a name: no ESC byte in any output" \
        sh -c "! grep -q \"$(printf '\033')\" '$OUT' '$ERR'"
fi
# And a profile's and a topology file's names, where the headers and
# notes of simulate, sweep and topo give them (until 2026-12-06 raw: a
# review).
esc_profile=$(printf '%s/esc\033[31m.profile.json' "$T")
if expect 0 "" -- profile "$MLP" --repetitions 1 --split 2 -o "$esc_profile"; then
    expect 0 "" -- simulate "$MLP" --devices cpu:2 --profile "$esc_profile"
    stdout_has "costs from $T/esc\x1b[31m.profile.json" "an escape sequence in a profile's name: simulate"
    check "an escape sequence in a profile's name: no ESC byte from simulate" \
        sh -c "! grep -q \"$(printf '\033')\" '$OUT' '$ERR'"
    expect 0 "" -- sweep "$MLP" --devices cpu:2 --microbatches 1,2 --simulate --profile "$esc_profile"
    check "an escape sequence in a profile's name: no ESC byte from sweep" \
        sh -c "! grep -q \"$(printf '\033')\" '$OUT' '$ERR'"
fi
esc_topology=$(printf '%s/esc\033[31m.xml' "$T")
cp "$ROOT/tests/fixtures/two-socket-8-core.xml" "$esc_topology"
expect 0 "" -- topo --topology "$esc_topology"
stdout_has "$T/esc\x1b[31m.xml: 2 packages" "an escape sequence in a topology's name: topo"
check "an escape sequence in a topology's name: no ESC byte from topo" \
    sh -c "! grep -q \"$(printf '\033')\" '$OUT' '$ERR'"
# So do the notes that name a checkpoint, and what a training state says
# of its run (until 2026-12-04 --load and --resume's notes showed it raw).
esc_state=$(printf '%s/esc\033[31m.st' "$T")
if expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --lr-schedule cosine \
    --test-samples 16 --save "$esc_state"; then
    expect 0 "" -- train "$MODEL" --data synthetic --steps 3 --batch 16 --test-samples 16 \
        --resume "$esc_state"
    stderr_has "note: $T/esc\x1b[31m.st was saved by a run with" "an escape sequence: --resume"
    check "an escape sequence in a state's name: no ESC byte from --resume" \
        sh -c "! grep -q \"$(printf '\033')\" '$OUT' '$ERR'"
    expect 0 "" -- train "$MODEL" --data synthetic --steps 0 --batch 16 --test-samples 16 \
        --load "$esc_state"
    stdout_has "evaluated the weights of $T/esc\x1b[31m.st;" "an escape sequence: --load"
    check "an escape sequence in a state's name: no ESC byte from --load" \
        sh -c "! grep -q \"$(printf '\033')\" '$OUT' '$ERR'"
fi
nl_name=$(printf '%s/two\nlines.model' "$T")
cp "$MODEL" "$nl_name"
expect 0 "" -- summary "$nl_name"
stdout_has "$T/two\x0alines.model: 8 layers" "a newline in a name: the summary's header, one line"
# "-" is no file: standard output holds the text report; the pictures are
# SVG, whatever the name says, so another format's name is refused.
stdout_dash="this goes to a file; standard output holds the text report (give a file name, or /dev/stdout to mix the two)"
usage_error "--trace -: $stdout_dash" -- simulate "$MODEL" --trace -
usage_error "--metrics -: $stdout_dash" -- train "$MODEL" --data synthetic --steps 1 --metrics -
usage_error "-o -: $stdout_dash" -- profile "$MODEL" -o -
usage_error "--save -: this goes to a file; give a file name" -- train "$MODEL" --data synthetic \
    --steps 1 --save -
check "no file named '-' was made" test ! -e ./-
usage_error "--timeline $T/t.PNG: brigade draws SVG only; name it .svg" -- simulate "$MODEL" \
    --timeline "$T/t.PNG"
usage_error "--chart $T/c.pdf: brigade draws SVG only; name it .svg" -- sweep "$MODEL" \
    --microbatches 1 --simulate --chart "$T/c.pdf"
# Swapped names: each output into the other's file.
usage_error "--trace $T/t.svg: this is JSON; name it .json" -- train "$MODEL" --data synthetic \
    --steps 1 --trace "$T/t.svg" --timeline "$T/t.json"
usage_error "--timeline $T/t.Json: this is an SVG picture; name it .svg" -- simulate "$MODEL" \
    --timeline "$T/t.Json"
usage_error "--metrics $T/m.svg: this is JSON; name it .json" -- simulate "$MODEL" \
    --metrics "$T/m.svg"
usage_error "--chart $T/c.json: this is an SVG picture; name it .svg (a .json name is for a JSON output, such as --metrics)" -- sweep "$MODEL" \
    --microbatches 1 --simulate --chart "$T/c.json"
usage_error "-o $T/p.svg: this is JSON; name it .json (a .svg name is for an SVG picture)" -- profile "$MODEL" -o "$T/p.svg"
# A report under a checkpoint's name, which --load would take for one.
usage_error "--metrics $T/m.safetensors: this is JSON; name it .json (a .safetensors name is for a checkpoint, --save)" \
    -- simulate "$MODEL" --metrics "$T/m.safetensors"
usage_error "--timeline $T/t.SafeTensors: this is an SVG picture; name it .svg (a .safetensors name is for a checkpoint, --save)" \
    -- simulate "$MODEL" --timeline "$T/t.SafeTensors"
check "no file was written under a swapped name" sh -c "! ls '$T'/t.svg '$T'/t.json '$T'/m.safetensors 2>/dev/null"
expect 0 "" -- simulate "$MODEL" --timeline "$T/t.svg.d" --trace "$T/t.png"
check "a picture not named as another format, and a trace named .png, are written" \
    test -s "$T/t.svg.d" -a -s "$T/t.png"
cp "$MODEL" "$T/own.model"
usage_error "--metrics '$T/own.model' is the file MODEL reads: writing it would destroy it" -- \
    train "$T/own.model" --data synthetic --steps 1 --batch 16 --metrics "$T/own.model"
check "the model spec is left whole" cmp -s "$MODEL" "$T/own.model"
usage_error "-o '$T/own.model' is the file MODEL reads" -- profile "$T/own.model" -o "$T/own.model"
usage_error "--chart '$T/own.model' is the file MODEL reads" -- sweep "$T/own.model" \
    --microbatches 1 --simulate --chart "$T/own.model"
# The data's files are inputs: an output may neither replace one nor take
# the place of a plain name that would be read before its .gz.
mkdir "$T/idx"
printf 'not read' >"$T/idx/train-images-idx3-ubyte.gz"
usage_error "--save '$T/idx/train-images-idx3-ubyte.gz' is the file --data reads: writing it would destroy it" \
    -- train "$MODEL" --data "$T/idx" --steps 1 --save "$T/idx/train-images-idx3-ubyte.gz"
check "the data file is left whole" grep -qx 'not read' "$T/idx/train-images-idx3-ubyte.gz"
usage_error "--metrics '$T/idx/t10k-labels-idx1-ubyte' is a name --data reads first where it is: writing it would put a file there for it to read" \
    -- train "$MODEL" --data "$T/idx" --steps 1 --metrics "$T/idx/t10k-labels-idx1-ubyte"
usage_error "--chart '$T/idx/train-labels-idx1-ubyte.gz' is a name --data reads" -- sweep "$MODEL" \
    --data "$T/idx" --microbatches 1 --chart "$T/idx/train-labels-idx1-ubyte.gz"
if expect 0 "" -- train "$MODEL" --data synthetic --steps 2 --batch 16 --save "$T/state.st"; then
    ln "$T/state.st" "$T/state-link.st"
    usage_error "--metrics '$T/state-link.st' is the file --resume reads" -- train "$MODEL" \
        --data synthetic --steps 3 --batch 16 --resume "$T/state.st" --metrics "$T/state-link.st"
    expect 0 "" -- train "$MODEL" --data synthetic --steps 3 --batch 16 --resume "$T/state.st" \
        --save "$T/state.st"
fi
# A closed standard output: said, with why (until 2026-12-04 with no reason).
"$BRIGADE" summary "$MODEL" >&- 2>"$ERR"
status=$?
check "summary >&-: exit status 1 (was $status)" test "$status" -eq 1
check "summary >&-: said, with why" grep -qFx \
    "brigade summary: cannot write the standard output: Bad file descriptor" "$ERR"
# --metrics /dev/stdout of a closed standard output: said so (until
# 2026-12-06 "No space left on device", of the /dev/full that stands in).
"$BRIGADE" simulate "$MODEL" --metrics /dev/stdout >&- 2>"$ERR"
status=$?
check "simulate --metrics /dev/stdout >&-: exit status 1 (was $status)" test "$status" -eq 1
check "simulate --metrics /dev/stdout >&-: said why" grep -qFx \
    "brigade simulate: metrics: cannot write '/dev/stdout': it is the standard output, which was closed when brigade started" \
    "$ERR"
"$BRIGADE" profile "$T/late.model" --repetitions 1 -o /dev/stdout >&- 2>"$ERR"
status=$?
check "profile -o /dev/stdout >&-: exit status 1 (was $status)" test "$status" -eq 1
check "profile -o /dev/stdout >&-: said why" grep -qFx \
    "brigade profile: cannot write '/dev/stdout': it is the standard output, which was closed when brigade started" \
    "$ERR"
# /dev/full named itself is full, stdout closed or not.
if [ -w /dev/full ]; then
    "$BRIGADE" simulate "$MODEL" --metrics /dev/full >&- 2>"$ERR"
    check "simulate --metrics /dev/full >&-: the disk is full" grep -qFx \
        "brigade simulate: metrics: cannot write '/dev/full': No space left on device" "$ERR"
fi
# A folder that is there but takes no new file (/proc answers ENOENT) is
# not called missing (until 2026-12-04: "folder '/proc' does not exist").
if [ -d /proc/self ]; then
    usage_error "cannot write '/proc/version': mkostemp: No such file or directory" -- \
        train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics /proc/version
    check "/proc: not called missing" sh -c "! grep -q 'does not exist' '$ERR'"
fi
# A full disk shows only when the file is closed.
if [ -w /dev/full ]; then
    # The standard output too: a plan that could not be written is no plan.
    "$BRIGADE" plan "$MODEL" --json >/dev/full 2>"$ERR"
    status=$?
    check "plan --json >/dev/full: exit status 1 (was $status)" test "$status" -eq 1
    check "plan --json >/dev/full: said, by the command" grep -qF \
        "brigade plan: cannot write the standard output: No space left on device" "$ERR"
    # A plan that does not fit keeps its 2 (the help says so): the answer
    # a script asks for stands, with the output lost said.
    "$BRIGADE" plan "$MODEL" --json --device-mem 1M >/dev/full 2>"$ERR"
    status=$?
    check "plan that does not fit >/dev/full: exit status 2 (was $status)" test "$status" -eq 2
    check "plan that does not fit >/dev/full: said" grep -qF \
        "brigade plan: cannot write the standard output: No space left on device" "$ERR"
    # ... and so is help or a version that could not be written.
    # A help text is flushed whole at the end, where the reason is known.
    for words in "help train" "--help" "--version" "sweep -h" "plan $MODEL -h" \
        "sweep $MODEL --simulate --microbatches 1,2"; do
        # shellcheck disable=SC2086 # the words are meant to split
        "$BRIGADE" $words >/dev/full 2>"$ERR"
        status=$?
        case "$words" in
        help*) who="brigade ${words#help }" ;;
        -*) who=brigade ;;
        *) who="brigade ${words%% *}" ;;
        esac
        check "$words >/dev/full: exit status 1 (was $status)" test "$status" -eq 1
        check "$words >/dev/full: said why" grep -qFx \
            "$who: cannot write the standard output: No space left on device" "$ERR"
    done
    expect 1 "metrics: cannot write '/dev/full': No space left on device" -- \
        train "$MODEL" --data synthetic --steps 1 --batch 16 --metrics /dev/full
    # The same writer for simulate's metrics and profile's output.
    expect 1 "metrics: cannot write '/dev/full': No space left on device" -- \
        simulate "$MODEL" --devices cpu:2 --metrics /dev/full
    expect 1 "profile: cannot write '/dev/full': No space left on device" -- \
        profile "$MODEL" --batch 4 --repetitions 1 -o /dev/full
    # An output that cannot be written costs only itself: the others are
    # written, and the status says one failed.
    rm -f "$T/after-full.svg" "$T/after-full.json"
    expect 1 "brigade train: trace: cannot write '/dev/full': No space left on device" -- \
        train "$MODEL" --data synthetic --steps 2 --batch 16 --devices cpu:2 --microbatches 2 \
        --trace /dev/full --timeline "$T/after-full.svg" --metrics "$T/after-full.json"
    stderr_has "timeline written to $T/after-full.svg" "after a failed trace, the timeline"
    stderr_has "metrics written to $T/after-full.json" "after a failed trace, the metrics"
    check "after a failed trace, the metrics file is whole" python3 -c \
        'import json, sys; assert json.load(open(sys.argv[1]))["steps"] == 2' "$T/after-full.json"
    expect 1 "brigade sweep: svg chart: cannot write '/dev/full'" -- sweep "$MODEL" --simulate \
        --microbatches 1,2 --chart /dev/full --metrics "$T/after-full.json"
    stderr_has "metrics written to $T/after-full.json" "after a failed chart, the sweep's metrics"
fi

# A trace (Chrome's JSON) and an SVG timeline of the recorded steps.
if expect 0 "" -- train "$MODEL" --data synthetic --steps 3 --batch 16 --devices cpu:2 \
    --microbatches 2 --trace "$T/T.json" --timeline "$T/T.svg"; then
    stderr_has "trace written to $T/T.json" "train --trace"
    stderr_has "timeline written to $T/T.svg" "train --timeline"
    check "the trace has forward, backward and step events of the 3 recorded steps" \
        python3 -c '
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in events if e.get("ph") == "X"]
assert {e["cat"] for e in spans} >= {"F", "B", "step"}, {e["cat"] for e in spans}
assert {e["pid"] for e in spans if e["cat"] == "F"} == {0, 1}, "both stages"
steps = sorted({e["args"]["step"] for e in spans if e["cat"] == "F"})
assert steps == [0, 1, 2], steps
assert all(e["dur"] >= 0 for e in spans)
' "$T/T.json"
    check "the timeline is a whole SVG document" python3 -c '
import sys
text = open(sys.argv[1]).read()
assert text.startswith("<?xml") or text.startswith("<svg"), text[:40]
assert "<svg" in text and text.rstrip().endswith("</svg>"), text[-40:]
' "$T/T.svg"
fi
# The last 2 of 5 steps: the run's numbers, as progress counts them, beside
# the recorded index; a simulated trace has no run to number.
if expect 0 "" -- train "$MODEL" --data synthetic --steps 5 --batch 16 --devices cpu:2 \
    --microbatches 2 --record-steps 2 --trace "$T/T2.json" --timeline "$T/T2.svg"; then
    stdout_has "last 2 steps (4 to 5 of the run), as recorded; ms and % per step, their mean:" "the summary says which steps"
    check "the trace numbers the recorded steps as the run's" python3 -c '
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
spans = [e for e in events if e.get("ph") == "X"]
assert [e["name"] for e in spans if e["cat"] == "span"] == ["step 4", "step 5"], spans[-2:]
pairs = sorted({(e["args"]["step"], e["args"]["run_step"]) for e in spans if e["cat"] == "F"})
assert pairs == [(0, 4), (1, 5)], pairs
' "$T/T2.json"
    check "the timeline's boxes name the run's step" grep -q ', step 5: ' "$T/T2.svg"
    check "the timeline's title names the run's step it shows" \
        grep -q 'showing the last, step 5 of the run' "$T/T2.svg"
fi
# One recorded step: the title names it too (until 2026-12-05 only with two
# or more).
if expect 0 "" -- train "$MODEL" --data synthetic --steps 3 --batch 16 --devices cpu:2 \
    --microbatches 2 --record-steps 1 --timeline "$T/T1.svg"; then
    check "one recorded step: the timeline's title names it" \
        grep -qE 'step [0-9.]+ ms; step 3 of the run</text>' "$T/T1.svg"
fi
if expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 2 --trace "$T/S.json"; then
    check "a simulated trace: steps from 0, no run_step" python3 -c '
import json, sys
spans = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
assert [e["name"] for e in spans if e["cat"] == "span"][0] == "step 0"
assert not any("run_step" in e["args"] for e in spans)
' "$T/S.json"
fi

# --- sweep ---------------------------------------------------------------------

usage_error "--microbatches LIST is required (e.g. 1,2,4,8)" -- sweep "$MODEL"
usage_error "--microbatches 65 with --batch 64 would leave some micro-batches empty (at most --microbatches 64)" \
    -- sweep "$MODEL" --simulate --microbatches 1,65
usage_error "--microbatches: empty item in ',' (expected A,B,...)" -- sweep "$MODEL" --microbatches ,
usage_error "--microbatches: empty item in '4,'" -- sweep "$MODEL" --microbatches 4,
usage_error "--microbatches: empty item in '1,,4'" -- sweep "$MODEL" --microbatches 1,,4
usage_error "--microbatches: 0 is outside 1..65536" -- sweep "$MODEL" --microbatches 1,0
usage_error "--microbatches: expected an integer, got 'many'" -- sweep "$MODEL" --microbatches many
usage_error "--schedule: gpipe is listed twice" -- sweep "$MODEL" --microbatches 1 \
    --schedule gpipe,1f1b,zb-h1,gpipe,1f1b
usage_error "--microbatches: 4 is listed twice" -- sweep "$MODEL" --microbatches 4,2,4
usage_error "--schedule: empty item in ','" -- sweep "$MODEL" --microbatches 1 --schedule ,
usage_error "--schedule: unknown schedule 'auto' (expected gpipe, 1f1b, interleaved or zb-h1; a sweep lists them" \
    -- sweep "$MODEL" --microbatches 1 --schedule gpipe,auto
usage_error "--microbatches: auto picks one count; a sweep lists those to compare, as in 1,2,4,8 (brigade plan --microbatches auto says which it would pick)" \
    -- sweep "$MODEL" --microbatches 2,auto
usage_error "--chart: cannot write '$T/no/d/C.svg': folder '$T/no/d'" -- sweep "$MODEL" \
    --simulate --microbatches 1 --chart "$T/no/d/C.svg"
# A rate under 1 sample/s keeps 3 digits (it printed 0), and one step is
# a step.
printf 'input channels=256 height=256 width=256\nconv2d filters=512 kernel=3\nflatten\ndense units=10\nsoftmax_cross_entropy\n' \
    >"$T/slow.model"
# The first line, on stdout with the table (a table redirected to a file
# kept no word of what it measured), says what is swept and how.
expect 0 "" -- sweep "$T/slow.model" --simulate --batch 4096 --device-mem 1T --microbatches 8 \
    --steps 1
stdout_has "simulated sweep of $T/slow.model, batch 4096, 1 step per point" "sweep: its first line"
check "sweep: the first line not on stderr" sh -c "! grep -q 'sweep of' '$ERR'"
check "sweep: a slow point's samples/s in 3 digits" \
    grep -qE '^   8  1f1b +[0-9.]+ +- +0\.[0-9]{3} ' "$OUT"
# Figures wider than their columns widen them: each right-aligned figure
# still ends under the end of its header (they ran out of line).
expect 2 "" -- plan "$T/slow.model" --batch 4096 --device-mem 1T --devices cpu:2
check "plan: a table of wide figures stays in line" python3 -c '
import sys
lines = open(sys.argv[1]).read().splitlines()
at = next(i for i, l in enumerate(lines) if l.startswith("stage  layers"))
header, rows = lines[at], lines[at + 1:at + 3]
for name in ("fwd ms", "busy ms", "peak MiB", "stash", "other"):
    end = header.index(name) + len(name)
    for row in rows:
        assert row[end - 1] != " " and (end == len(row) or row[end] == " "), (name, row)
' "$OUT"
# A step under 0.1 ms is told to 0.001 ms, as the metrics hold it (until
# 2026-12-05 a tiny model's 0.011 ms was "0.01").
printf '%s\n' 'input channels=1 height=1 width=2' flatten 'dense units=2' 'dense units=2' \
    softmax_cross_entropy >"$T/tiny.model"
if expect 0 "" -- sweep "$T/tiny.model" --simulate --devices cpu:2 --microbatches 1 \
    --metrics "$T/tiny.json"; then
    check "a step under 0.1 ms to 0.001 ms" python3 -c '
import json, re, sys
row = [l for l in open(sys.argv[1]) if re.match(r" +1 +1f1b ", l)][0].split()
ms = json.load(open(sys.argv[2]))["points"][0]["timeline"]["step_s"] * 1e3
assert ms < 0.1 and row[2] == "%.3f" % ms, (row, ms)' "$OUT" "$T/tiny.json"
fi
# Every point skipped (none fits 1M): exit 2, and no chart.
expect 2 "every point was skipped (above); no chart written" -- sweep "$MODEL" --simulate \
    --devices cpu:2 --device-mem 1M --microbatches 1,4 --chart "$T/none.svg"
check "a sweep with no point writes no chart" test ! -e "$T/none.svg"
stdout_has "(a point that does not fit: 'brigade plan' with the sweep's options and that point's --microbatches, such as 1, says what would help)" \
    "a sweep of points that do not fit points to plan's advice"
# Some skipped: each a cross on the M axis; a schedule with none left keeps
# its colour and says so; the title names what was swept.
if expect 0 "" -- sweep "$MODEL" --simulate --devices cpu:2 --device-mem 12M --microbatches 1,8 \
    --schedule gpipe,1f1b --chart "$T/some.svg"; then
    check "skipped points on the chart" python3 -c '
import sys, xml.dom.minidom
text = open(sys.argv[1]).read()
xml.dom.minidom.parseString(text)
assert text.count("class=\"skipped\"") == 3, text.count("class=\"skipped\"")
assert ">gpipe (simulated) (every point skipped)<" in text
assert "1f1b (simulated) (every" not in text
# The subtitle, wrapped or not as the checkout path makes it long.
import re
lines = re.findall(r"fill=\"#444\">([^<]*)</text>", text)
assert " ".join(lines).endswith("fashion_cnn.model, batch 64, on cpu:0, cpu:1; simulated from the analytic cost model"), lines
' "$T/some.svg"
fi
# Many devices: named by the first few and the last, so that the rest of
# the subtitle stays (until 2026-12-05 a 256-byte list was cut at cpu:32,
# and a long model path cut the subtitle mid-path).
python3 -c '
print("input channels=1 height=1 width=16\nflatten")
for _ in range(12): print("dense units=16 activation=relu")
print("dense units=10\nsoftmax_cross_entropy")' >"$T/deep12.model"
if expect 0 "" -- sweep "$T/deep12.model" --simulate --devices cpu:12 --microbatches 1,12 \
    --chart "$T/twelve.svg"; then
    # Wrapped at spaces into lines of at most 104 bytes (the scratch
    # folder's path makes it two).
    check "a chart of many devices: the subtitle whole" python3 -c '
import re, sys
lines = re.findall(r"fill=\"#444\">([^<]*)</text>", open(sys.argv[1]).read())
assert 2 <= len(lines) <= 4 and all(len(l.encode()) <= 104 for l in lines), lines
assert " ".join(lines).endswith("deep12.model, batch 64, on cpu:0, cpu:1, cpu:2, ..., cpu:11 (12 devices); simulated from the analytic cost model"), lines
' "$T/twelve.svg"
fi
# Counts that do not divide the batch: a note names their micro-batches'
# sizes (plan and simulate say them on their own lines); none where all do.
expect 0 "" -- sweep "$MODEL" --simulate --devices cpu:2 --microbatches 2,3,5,8
check "a sweep notes the counts of unequal micro-batches" grep -qxF \
    "note: a batch of 64 does not divide evenly into every count swept, and those points run micro-batches one sample apart (M=3: micro-batches of 21 or 22; M=5: micro-batches of 12 or 13)" \
    "$ERR"
expect 0 "" -- sweep "$MODEL" --simulate --devices cpu:2 --microbatches 2,4
check "no such note where every count divides the batch" sh -c "! grep -q 'does not divide' '$ERR'"
check "nor a pointer to plan's advice where every point fits" sh -c "! grep -q 'does not fit' '$OUT'"
# --chunks is interleaved's: the other schedules of the same sweep run.
if expect 0 "" -- sweep "$MODEL" --simulate \
    --devices cpu:2 --microbatches 2 --schedule 1f1b,interleaved --chunks 2; then
    stdout_has "on cpu:0, cpu:1, 2 chunks per device for interleaved" "sweep --chunks 2: its first line"
    check "a sweep with --chunks 2 has a 1f1b row and an interleaved one" python3 -c '
import re, sys
rows = [l.split() for l in open(sys.argv[1]) if re.match(r" +2 +", l)]
assert [r[1] for r in rows] == ["1f1b", "interleaved"], rows
assert len(rows[0][-2].split("/")) == 2 and len(rows[1][-2].split("/")) == 4, rows
assert rows[0][-1] == "4" and rows[1][-1] == "4,5,7", rows  # the split of each point
' "$OUT"
fi
expect 0 "" -- sweep --help
if grep -q "auto:" "$OUT"; then fail "sweep's help offers auto"; else pass; fi
usage_error "--batch 100000 is larger than the 8192 training samples" -- sweep "$MODEL" \
    --microbatches 1 --batch 100000 --data synthetic
# A measured sweep (no --simulate): a header and one row per point.
if expect 0 "" -- sweep "$MODEL" --devices cpu:2 --steps 1 --warmup 0 --microbatches 1,2 \
    --batch 16 --data synthetic; then
    check "a measured sweep prints a header, 2 rows (1f1b at M=1 and M=2) and the simulation's gap" python3 -c '
import re, sys
lines = open(sys.argv[1]).read().splitlines()
assert len(lines) == 5, lines
assert lines[0].startswith("sweep of ") and "1 timed step per point: on cpu:0, cpu:1" in lines[0], lines
assert lines[1].split()[:2] == ["M", "schedule"] and "sim ms (err)" in lines[1], lines[1]
row = (r" +{} +1f1b +[0-9.]+ +[0-9.]+-[0-9.]+ +[0-9]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ "
       r"\([+-][0-9]+%\) +[0-9.]+(/[0-9.]+)* +([0-9,]+|-)$")
for m, line in zip((1, 2), lines[2:4]):
    assert re.fullmatch(row.format(m), line), line
assert re.fullmatch(r"simulated against measured: mean \|error\| [0-9]+% over 2 points "
                    r"\(costs from the analytic cost model; .*\)", lines[4]), lines[4]
' "$OUT"
fi
# --metrics: each point's steps, spread and stages, as the table prints them.
if expect 0 "" -- sweep "$MODEL" --devices cpu:2 --steps 3 --warmup 0 --microbatches 2 \
    --batch 16 --metrics "$T/measured.json" --chart "$T/measured.svg"; then
    check "sweep --metrics says where it wrote" \
        grep -qxF "metrics written to $T/measured.json" "$ERR"
    # The chart draws the point's plan simulated beside the measured one: a
    # lone point as a ring (its line is a move only).
    check "a measured sweep's chart has the simulated samples/s" python3 -c '
import json, sys
(q,) = json.load(open(sys.argv[1]))["points"]
text = open(sys.argv[2]).read()
assert text.count("<path class=\"simulated\"") == 1, text
assert text.count("<circle class=\"simulated-point\"") == 1, text
want = "1f1b, M=2: %.1f samples/s (%.1f simulated)" % (16 / q["timeline"]["step_s"],
                                                      16 / (q["simulated_step_ms"] * 1e-3))
assert want in text, (want, text)
assert ">simulated samples/s (left)<" in text, text' "$T/measured.json" "$T/measured.svg"
    check "a measured sweep's metrics hold its row's figures" python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))
row = [l.split() for l in open(sys.argv[2]) if l.startswith("   2  1f1b")][0]
assert p["complete"] is True and p["simulated"] is False and p["warmup"] == 0, p
(q,) = p["points"]
t = q["timeline"]
assert t["steps"] == 3 and t["measured"] is True, t
assert 0 < t["step_min_s"] <= t["step_median_s"] <= t["step_max_s"], t
assert t["step_min_s"] <= t["step_s"] <= t["step_max_s"], t
assert row[2] == "%.2f" % (t["step_s"] * 1e3), row
assert row[3] == "%.2f-%.2f" % (t["step_min_s"] * 1e3, t["step_max_s"] * 1e3), row
assert row[-2] == "/".join("%.1f" % (s["peak_bytes"] / 2**20) for s in q["stages"]), row
assert [s["device"] for s in q["stages"]] == ["cpu:0", "cpu:1"], q["stages"]
assert all(s["peak_by_category"]["params"] > 0 for s in q["stages"]), q["stages"]
sim, step = q["simulated_step_ms"], t["step_s"] * 1e3
assert row[8] == "%.2f" % sim and row[9] == "(%+.0f%%)" % (100 * (sim - step) / step), row
# The split, last: the first layer of the second stage.
assert row[-1] == "%d" % q["stages"][1]["layers"][0], (row, q["stages"])
assert abs(p["simulated_mean_abs_error"] - abs(sim - step) / step) < 1e-12, p
assert 0 <= p["others_cpu_share"] <= 1, p' \
        "$T/measured.json" "$OUT"
    # sim ms is the step simulate predicts for the same placement.
    expect 0 "" -- simulate "$MODEL" --devices cpu:2 --microbatches 2 --batch 16 \
        --metrics "$T/measured-sim.json"
    check "a measured sweep's sim ms is simulate's step" python3 -c '
import json, sys
sweep, sim = (json.load(open(f)) for f in sys.argv[1:])
got, want = sweep["points"][0]["simulated_step_ms"], sim["timeline"]["step_s"] * 1e3
assert abs(got - want) <= 1e-9 * want, (got, want)' "$T/measured.json" "$T/measured-sim.json"
fi
# Other processes busy on every logical CPU while the points run: the
# sweep says how much of the machine they took (a load average taken
# before the points would miss them, the loops being new).
# As many loops as the logical CPUs online, which the share is of (nproc
# counts only those this process may run on); killed also when a signal
# ends the test, which would leave them spinning otherwise.
busy_pids=""
# shellcheck disable=SC2086 # a list of process ids
trap 'kill $busy_pids 2>/dev/null; exit 1' HUP INT TERM
for _ in $(seq "$(getconf _NPROCESSORS_ONLN)"); do
    sh -c 'while :; do :; done' &
    busy_pids="$busy_pids $!"
done
expect 0 "" -- sweep "$MODEL" --devices cpu:2 --steps 20 --warmup 0 --microbatches 2 \
    --batch 16 --metrics "$T/crowded.json"
cp "$ERR" "$T/crowded-sweep.err"
expect 0 "" -- train "$MODEL" --data synthetic --steps 30 --batch 16 --devices cpu:2 \
    --microbatches 2 --metrics "$T/crowded-train.json"
# shellcheck disable=SC2086
kill $busy_pids
trap 'exit 1' HUP INT TERM # the harness's again
check "a measured sweep beside busy loops notes the CPU time others took" grep -qE \
    "^note: other processes \(or a virtual machine's host\) took [0-9]+% of this machine's [0-9]+ logical CPUs? while the points ran: " \
    "$T/crowded-sweep.err"
check "and so does train, its timings asked for (--metrics)" grep -qE \
    "^note: other processes \(or a virtual machine's host\) took [0-9]+% of this machine's [0-9]+ logical CPUs? while it ran: " \
    "$ERR"
file_check "and says how much in its metrics" "$T/crowded.json" '
assert p["others_cpu_share"] >= 0.1, p["others_cpu_share"]'
usage_error "--chart and --metrics both name '$T/m.out': each output needs a file of its own" -- sweep "$MODEL" --simulate \
    --microbatches 1 --chart "$T/m.out" --metrics "$T/m.out"

# Options that would change nothing are refused, not dropped unseen.
usage_error "--warmup has no use with --simulate (nothing is run: every point is predicted)" -- \
    sweep "$MODEL" --simulate --microbatches 1 --warmup 1
usage_error "--data has no use with --simulate" -- sweep "$MODEL" --simulate --microbatches 1 \
    --data synthetic
usage_error "--chunks applies only to the interleaved schedule, which --schedule does not list" \
    -- sweep "$MODEL" --simulate --devices cpu:2 --microbatches 2 --chunks 2
# Interleaved with one chunk a device is not interleaving: refused by name.
usage_error "interleaved runs --chunks V stages per device, V of 2 or more (with one chunk a device it would be 1F1B's order with a longer warm-up): give --chunks 2 or more for its points" \
    -- sweep "$MODEL" --simulate --devices cpu:2 --microbatches 2 --schedule 1f1b,interleaved
for cmd in plan simulate train; do
    usage_error "interleaved runs --chunks V stages per device, V of 2 or more (with one chunk a device it would be 1F1B's order with a longer warm-up): give --chunks 2 or more, or --schedule 1f1b for that order" \
        -- "$cmd" "$MODEL" --devices cpu:2 --microbatches 2 --schedule interleaved --chunks 1
done

# --- option values -------------------------------------------------------------

# A forgotten value is not filled with the next option, and an option given
# twice is refused rather than the last one winning unseen.
usage_error "--metrics needs a value, got the option '--recompute' (a file whose name starts with -- can be written ./--recompute)" \
    -- simulate "$MODEL" --metrics --recompute
check "no file named after the next option" test ! -e ./--recompute
# A size is no file name: no hint at writing one as ./--NAME.
usage_error "--device-mem needs a value, got the option '--json'" -- plan "$MODEL" --device-mem --json
check "a size's missing value: no file hint" sh -c "! grep -qF './--json' '$ERR'"
usage_error "--stages given twice ('2' and '3')" -- plan "$MODEL" --stages 2 --stages 3
usage_error "--batch given twice ('8' and '16')" -- profile "$MODEL" --batch 8 --batch 16
usage_error "--topology given twice" -- topo --topology a.xml --topology b.xml
# So is a flag (an option without a value), in each command that has one.
usage_error "--json given twice" -- plan "$MODEL" --json --json
usage_error "--recompute given twice" -- plan "$MODEL" --recompute --stages 2 --recompute
usage_error "--simulate given twice" -- sweep "$MODEL" --simulate --microbatches 1 --simulate
usage_error "--tf32 given twice" -- train "$MODEL" --tf32 --steps 1 --tf32
# key=value is not read; the message shows the form that is.
usage_error "unknown option '--steps=2' (brigade takes an option's value as the next word: '--steps 2')" \
    -- train "$MODEL" --steps=2
# ... and with nothing after '=': the same form, not a guess of --steps.
usage_error "unknown option '--steps=' (brigade takes an option's value as the next word: '--steps VALUE')" \
    -- train "$MODEL" --steps=
usage_error "unknown option '--devices=cpu:2' (brigade takes an option's value as the next word: '--devices cpu:2')" \
    -- plan "$MODEL" --devices=cpu:2
usage_error "unknown option '--topology=t.xml' (brigade takes an option's value as the next word: '--topology t.xml')" \
    -- topo --topology=t.xml
# ... but only for an option of the command that takes a value.
for args in "plan --foo=3" "plan --json=1" "summary --steps=2"; do
    cmd=${args%% *} opt=${args#* }
    usage_error "unknown option '$opt'" -- "$cmd" "$MODEL" "$opt"
    check "$cmd $opt: no form suggested" sh -c "! grep -q 'next word' '$ERR'"
done
usage_error "--stages 300: without --devices that means cpu:300; " -- plan "$MODEL" --stages 300
# An output below a file: the file is named, not a permission.
: >"$T/plain.json"
usage_error "--metrics: cannot write '$T/plain.json/': '$T/plain.json' is not a folder" -- \
    simulate "$MODEL" --metrics "$T/plain.json/"
usage_error "--trace: cannot write '$T/plain.json/t.json': '$T/plain.json' is not a folder" -- \
    simulate "$MODEL" --trace "$T/plain.json/t.json"
usage_error "--nan-limit counts skipped steps: it needs --nan skip" -- train "$MODEL" \
    --nan-limit 5

# --- placement: --split lists ------------------------------------------------------

usage_error "--split: '2,' ends with a comma" -- train "$MODEL" --stages 2 --split 2,
usage_error "--split: no layer numbers" -- train "$MODEL" --stages 2 --split ''
usage_error "--split: more than 1024 stages" -- train "$MODEL" --split "$(seq -s, 1 1024)"

# --- simulate ------------------------------------------------------------------

usage_error "--metrics: cannot write '$T/no/d/M.json': folder '$T/no/d'" -- simulate "$MODEL" \
    --metrics "$T/no/d/M.json"
usage_error "--timeline: '$T' is a directory" -- simulate "$MODEL" --timeline "$T"
usage_error "--schedule: unknown schedule 'fast' (expected gpipe, 1f1b, interleaved, zb-h1 or auto)" \
    -- simulate "$MODEL" --schedule fast

# --- profile -------------------------------------------------------------------

usage_error "--devices cuda:0: this build profiles on a CPU core only" -- profile "$MODEL" \
    --devices cuda:0
usage_error "-o: cannot write '$T/no/d/P.json': folder '$T/no/d': No such file or directory" -- \
    profile "$MODEL" --batch 4 --repetitions 1 -o "$T/no/d/P.json"

# A model of more layers than profile times every range of: the profile
# says it holds no stage times, and so do the commands that use it.
deep_mlp "$T/deep.model" 32
expect 0 "note: $T/deep.model has 67 layers; every layer range is timed as a stage only for models of up to 64, so this profile holds no stage times" \
    -- profile "$T/deep.model" --batch 8 --repetitions 1 -o "$T/deep.json"
stderr_has "note: --repetitions 1: no timed run can be left out as an outlier" \
    "profile says one or two runs leave no outlier out"
check "a 67-layer profile without --split has no stages" python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
assert "stages" not in p and len(p["layers"]) == 67' "$T/deep.json"
expect 0 "note: $T/deep.json holds no stage times (its model has 67 layers, and without --split only models of up to 64 get them), so each stage is priced from the sum of its layers' times" \
    -- plan "$T/deep.model" --devices cpu:2 --batch 8 --profile "$T/deep.json"
# Two stages on one device (interleaved) are cut from it too.
expect 0 "note: $T/deep.json holds no stage times" -- plan "$T/deep.model" --devices cpu:1 \
    --schedule interleaved --chunks 2 --microbatches 2 --batch 8 --profile "$T/deep.json"
# One stage is the whole model: nothing to say.
expect 0 "" -- plan "$T/deep.model" --devices cpu:1 --batch 8 --profile "$T/deep.json"
check "no note for one stage" sh -c "! grep -q 'no stage times' '$ERR'"

finish
