#!/bin/bash
# sort-dedup: exact expected content.
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
[ -f unique.txt ] || fail "unique.txt does not exist"
expected='alice@example.com
bob@example.com
carol.smith@example.net
dave+news@example.com
erin_1@example.com
zoe@example.org'
got=$(cat unique.txt)
[ "$got" = "$expected" ] || fail "unique.txt holds:
$got
expected:
$expected"
[ "$(tail -c 1 unique.txt | od -An -c | tr -d ' ')" = '\n' ] || fail "unique.txt must end with a newline"
echo PASS
