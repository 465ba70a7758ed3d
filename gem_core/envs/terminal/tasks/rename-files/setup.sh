#!/bin/bash
# rename-files: 8 camera files (each holds its own number) and 2 bystanders.
set -eu
mkdir -p photos
for n in 7 12 99 100 123 1024 2048 5; do
    echo "image $n" > "photos/IMG_$n.JPG"
done
echo "trip notes" > photos/notes.txt
echo "keep this name" > photos/IMG_cover.JPG
