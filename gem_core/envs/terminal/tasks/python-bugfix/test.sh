#!/bin/bash
# python-bugfix: stats.py on hidden inputs (odd, even, unsorted, negative, one value).
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
[ -f stats.py ] || fail "stats.py is missing"
# This script runs as the grader; stats.py runs as the agent (as_agent), so it cannot read
# this file (the expected values) nor trace or signal this shell. The scratch directory
# holds only its input, readable by the agent but not writable.
scratch=$(mktemp -d) && chmod 755 "$scratch" || fail "no scratch directory"
check() {  # check <expected output> <numbers...>
    expected=$1; shift
    printf '%s\n' "$@" > "$scratch/in.txt"
    got=$(cd "$scratch" && as_agent python3 "$OLDPWD/stats.py" in.txt 2>&1)
    [ "$got" = "$expected" ] || fail "stats.py on [$*] printed '$got', expected '$expected'"
}
check "mean=2.5 median=2.5" 4 1 3 2
check "mean=3 median=3" 5 1 3
check "mean=7 median=5.5" 10 1 20 3 8 0
check "mean=-1 median=-1.5" -4 2 -2 0 -1 -3 3 -3
check "mean=42 median=42" 42
check "mean=2 median=2" 1 2 3
echo PASS
