#!/bin/bash
# count-lines: 7+14+21+28+35 + 12 = 117 lines in .txt files.
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
[ -f count.txt ] || fail "count.txt does not exist"
got=$(tr -d ' \t\r\n' < count.txt)
[ "$got" = "117" ] || fail "count.txt holds '$got', expected 117"
echo PASS
