#!/bin/bash
# log-analysis: 152 server errors; /old-page got the most 404s (19).
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
[ -f errors.txt ] || fail "errors.txt does not exist"
[ -f top404.txt ] || fail "top404.txt does not exist"
got=$(tr -d ' \t\r\n' < errors.txt)
[ "$got" = "152" ] || fail "errors.txt holds '$got', expected 152"
got=$(tr -s ' \t' ' ' < top404.txt | sed 's/^ //; s/ $//' | tr -d '\r\n')
[ "$got" = "/old-page 19" ] || fail "top404.txt holds '$got', expected '/old-page 19'"
echo PASS
