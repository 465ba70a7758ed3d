#!/bin/bash
# rename-files: exact listing and contents.
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
[ -d photos ] || fail "photos/ is missing"
got=$(ls photos | sort | tr '\n' ' ')
expected="IMG_cover.JPG notes.txt photo-0005.jpg photo-0007.jpg photo-0012.jpg photo-0099.jpg photo-0100.jpg photo-0123.jpg photo-1024.jpg photo-2048.jpg "
[ "$got" = "$expected" ] || fail "photos/ holds [$got], expected [$expected]"
for n in 5 7 12 99 100 123 1024 2048; do
    f=$(printf 'photos/photo-%04d.jpg' "$n")
    [ "$(cat "$f")" = "image $n" ] || fail "$f does not hold the content of IMG_$n.JPG"
done
[ "$(cat photos/IMG_cover.JPG)" = "keep this name" ] || fail "photos/IMG_cover.JPG changed"
echo PASS
