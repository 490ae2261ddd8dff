# The harness of the command-line tests (test_cli.sh, test_plan.sh,
# test_simulate.sh), sourced by each after it sets TEST_NAME:
#
#   TEST_NAME=plan
#   . "$(dirname "$0")/cli_harness.sh"
#
# It checks the one argument (the brigade binary), finds examples/ through
# $BRIGADE_SOURCE_ROOT (set by meson) or next to the tests, makes a scratch
# directory $T (removed on exit; tests/harness.sh, with check and finish),
# and defines run, expect, stdout_has, json_check and deep_mlp; they count
# passes and failures for the closing line "N passed, M failed" (finish).

if [ $# -ne 1 ] || [ ! -x "$1" ]; then
    echo "usage: $0 PATH/TO/brigade" >&2
    exit 2
fi
case $1 in
/*) BRIGADE=$1 ;;
*) BRIGADE=$(pwd)/$1 ;;
esac

if [ -n "${BRIGADE_SOURCE_ROOT:-}" ]; then
    ROOT=$BRIGADE_SOURCE_ROOT
else
    ROOT=$(cd "$(dirname "$0")/.." && pwd)
fi
MODEL=$ROOT/examples/fashion_cnn.model
if [ ! -f "$MODEL" ]; then
    echo "$TEST_NAME: cannot find $MODEL (set BRIGADE_SOURCE_ROOT)" >&2
    exit 2
fi

# The CUDA module is looked for where the build put it, whatever the
# caller's environment says (test_cli.sh sets this itself).
unset BRIGADE_CUDA_MODULE

# $T, pass, fail, check and finish (tests/harness.sh); a failure shows
# what the last command printed on stderr.
. "$(dirname "$0")/harness.sh"
OUT=$T/stdout
ERR=$T/stderr
SHOW_FILE=$ERR
SHOW_LABEL=stderr

# run ARGS...: runs brigade with stdin from /dev/null, stdout and stderr to
# files (so neither is a terminal); leaves the exit status in $status.
run() {
    "$BRIGADE" "$@" </dev/null >"$OUT" 2>"$ERR"
    status=$?
}

# wait_for FILE: waits until FILE exists, a background process's sign that
# it is ready (a FIFO's reader that has opened it), for at most 20 s.
wait_for() {
    tries=0
    while [ ! -e "$1" ] && [ "$tries" -lt 400 ]; do
        sleep 0.05
        tries=$((tries + 1))
    done
}

# expect STATUS 'stderr substring' -- ARGS...: runs brigade with ARGS and
# checks its exit status and that stderr contains the substring ('' accepts
# any stderr). STATUS may be 'nonzero'.
expect() {
    want=$1
    needle=$2
    shift 2
    [ "$1" = "--" ] && shift
    what="brigade $*"
    run "$@"
    if [ "$want" = nonzero ]; then
        if [ "$status" -eq 0 ]; then
            fail "$what: exit status 0, expected non-zero"
            return 1
        fi
    elif [ "$status" -ne "$want" ]; then
        fail "$what: exit status $status, expected $want"
        return 1
    fi
    if [ -n "$needle" ] && ! grep -qF -- "$needle" "$ERR"; then
        fail "$what: stderr does not contain '$needle'"
        return 1
    fi
    pass
    return 0
}

# usage_error 'stderr substring' -- ARGS...: expect 2 and, since a usage or
# input error is found before anything runs, nothing on stdout. (Not every
# exit 2 is one: a plan that does not fit exits 2 after printing its table,
# and is checked with expect.)
usage_error() {
    if expect 2 "$@"; then
        shift 2
        check "brigade $*: exit 2 but stdout is not empty" test ! -s "$OUT"
    fi
}

# stdout_has 'substring' WHAT: checks the last command's stdout.
stdout_has() {
    if grep -qF -- "$1" "$OUT"; then
        pass
    else
        fail "$2: stdout does not contain '$1'"
    fi
}

# stderr_has 'substring' WHAT: checks the last command's stderr.
stderr_has() {
    if grep -qF -- "$1" "$ERR"; then
        pass
    else
        fail "$2: stderr does not contain '$1'"
    fi
}

# deep_mlp FILE PAIRS: writes a model of 2 * PAIRS + 3 layers (a 4x4
# input flattened, PAIRS dense layers of 8 units each with its relu, a
# dense layer of 4 and the loss): deeper than profile times every range of
# when PAIRS is 31 or more.
deep_mlp() {
    {
        echo "input channels=1 height=4 width=4"
        echo flatten
        i=0
        while [ "$i" -lt "$2" ]; do
            echo "dense units=8 activation=relu"
            i=$((i + 1))
        done
        echo "dense units=4"
        echo softmax_cross_entropy
    } >"$1"
}

# into_closed_pipe STATUS_FILE COMMAND...: runs COMMAND with its standard
# output a pipe whose reader is already gone, SIGPIPE at its default
# whatever the test's runner set (Python's subprocess restores it), and
# standard error discarded; writes 141 into STATUS_FILE where SIGPIPE ended
# it, else its exit status.
into_closed_pipe() {
    status_file=$1
    shift
    python3 -c 'import os, subprocess, sys
r, w = os.pipe()
os.close(r)
code = subprocess.run(sys.argv[1:], stdout=w, stderr=subprocess.DEVNULL).returncode
print(128 - code if code < 0 else code)' "$@" >"$status_file"
}

# json_check WHAT PYTHON-CODE: runs the code on the last command's stdout
# parsed as JSON (bound to `p`); sys.argv[2] is the scratch directory.
json_check() {
    what=$1
    if python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
$2" "$OUT" "$T" 2>"$T/python.err"; then
        pass
    else
        fail "$what"
        sed 's/^/    /' "$T/python.err" >&2
    fi
}

# file_check WHAT FILE PYTHON-CODE: runs the code on FILE parsed as JSON
# (bound to `p`; the file's path is sys.argv[1]).
file_check() {
    what=$1
    if python3 -c "import json, sys
p = json.load(open(sys.argv[1]))
$3" "$2" 2>"$T/python.err"; then
        pass
    else
        fail "$what"
        sed 's/^/    /' "$T/python.err" >&2
    fi
}
