#!/bin/bash
# word-frequency: exact top-5 (the tie at 3 between "and" and "rain" goes to "and").
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
[ -f top5.txt ] || fail "top5.txt does not exist"
expected='the 8
runs 5
river 4
sea 4
and 3'
got=$(tr -d '\r' < top5.txt | sed 's/[[:space:]]*$//')
[ "$got" = "$expected" ] || fail "top5.txt holds:
$got
expected:
$expected"
echo PASS
