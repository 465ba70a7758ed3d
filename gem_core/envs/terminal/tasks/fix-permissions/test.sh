#!/bin/bash
# fix-permissions: exact modes.
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
mode() { stat -c %a "$1" 2>/dev/null || echo missing; }
for f in scripts/build.sh scripts/test.sh scripts/deploy/push.sh; do
    [ "$(mode "$f")" = "755" ] || fail "$f has mode $(mode "$f"), expected 755"
done
[ "$(mode scripts/notes.txt)" = "644" ] || fail "scripts/notes.txt has mode $(mode scripts/notes.txt), expected 644"
[ "$(mode secrets)" = "700" ] || fail "secrets/ has mode $(mode secrets), expected 700"
for f in secrets/api.key secrets/db.password; do
    [ "$(mode "$f")" = "600" ] || fail "$f has mode $(mode "$f"), expected 600"
done
[ "$(mode README.txt)" = "444" ] || fail "README.txt has mode $(mode README.txt), expected 444"
[ "$(cat secrets/db.password 2>/dev/null)" = "hunter2" ] || fail "secrets/db.password lost its content"
echo PASS
