#!/bin/bash
# make-dir-tree: starts from an empty workspace (plus an unrelated file).
set -eu
echo "keep me" > unrelated.txt
