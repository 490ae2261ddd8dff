# The smallest shared harness of the shell tests, sourced after TEST_NAME is
# set (cli_harness.sh builds on it for the command-line tests):
#
#   TEST_NAME=install
#   . "$(dirname "$0")/harness.sh"
#
# It makes a scratch directory $T (removed on exit) and defines pass, fail
# WHAT, check WHAT COMMAND... and finish, which prints the closing line
# "N passed, M failed" and returns the status. A test may set SHOW_FILE
# (and SHOW_LABEL) to a file that fail prints, indented: what the last
# command wrote.

T=$(mktemp -d "${TMPDIR:-/tmp}/brigade-$TEST_NAME.XXXXXX") || exit 1
trap 'rm -rf "$T"' EXIT
trap 'exit 1' HUP INT TERM
passed=0
failed=0
SHOW_FILE=
SHOW_LABEL=output

pass() {
    passed=$((passed + 1))
}

# fail WHAT: records a failure, with SHOW_FILE's start when it has one.
fail() {
    failed=$((failed + 1))
    echo "FAIL: $1" >&2
    if [ -n "$SHOW_FILE" ] && [ -s "$SHOW_FILE" ]; then
        echo "  $SHOW_LABEL:" >&2
        head -c 2000 "$SHOW_FILE" | sed 's/^/    /' >&2
    fi
}

# check WHAT CONDITION-COMMAND... : counts a pass if the command succeeds.
check() {
    what=$1
    shift
    if "$@"; then
        pass
    else
        fail "$what"
    fi
}

# finish: the closing line, and the status (0 when nothing failed).
finish() {
    echo "$passed passed, $failed failed"
    [ "$failed" -eq 0 ]
}
