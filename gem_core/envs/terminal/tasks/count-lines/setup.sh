#!/bin/bash
# count-lines: deterministic text files (105 + 12 lines in .txt files, 50 in a .md decoy).
set -eu
mkdir -p data/sub/deeper
for i in 1 2 3 4 5; do
    seq 1 $((i * 7)) | sed "s/^/entry /" > "data/part$i.txt"
done
seq 1 12 > "data/sub/deeper/extra notes.txt"
seq 1 50 > data/readme.md
printf 'no newline at the end' > data/sub/tail.log
