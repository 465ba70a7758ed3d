#!/bin/bash
# csv-aggregate: the exact expected totals.csv (computed with exact decimals).
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
[ -f totals.csv ] || fail "totals.csv does not exist"
expected='region,revenue
east,279.67
north,277.16
south,575.96
west,355.76'
got=$(tr -d '\r' < totals.csv)
[ "$got" = "$expected" ] || fail "totals.csv holds:
$got
expected:
$expected"
echo PASS
