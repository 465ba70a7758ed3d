#!/bin/bash
# fix-shell-script: backup/ in the workspace, and a fresh run of backup.sh on a copy.
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
check_backup() {  # check_backup <dir>
    got=$(cd "$1" && ls backup 2>/dev/null | sort | tr '\n' '|')
    [ "$got" = "ideas for  the talk.txt|shopping list.txt|todo.txt|" ] || fail "$2: backup/ holds [$got]"
    [ "$(cat "$1/backup/shopping list.txt")" = "buy milk" ] || fail "$2: backup/shopping list.txt has the wrong content"
}
[ -f backup.sh ] || fail "backup.sh is missing"
check_backup . "in the workspace"
# This script runs as the grader; backup.sh runs as the agent (as_agent), so it cannot read
# this file nor trace or signal this shell. It may write in the scratch copy (its backup/).
scratch=$(mktemp -d) && chmod 777 "$scratch" || fail "no scratch directory"
cp -r notes backup.sh "$scratch"/
echo "new" > "$scratch/notes/late entry.txt"
out=$(cd "$scratch" && as_agent bash backup.sh 2>&1) || fail "bash backup.sh failed on a fresh copy: $out"
[ "$out" = "backed up 4 files" ] || fail "bash backup.sh printed '$out', expected 'backed up 4 files'"
[ -f "$scratch/backup/late entry.txt" ] || fail "a fresh run did not copy 'late entry.txt'"
[ ! -e "$scratch/backup/image.png" ] || fail "image.png must not be copied"
echo PASS
