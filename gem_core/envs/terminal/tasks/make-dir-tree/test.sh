#!/bin/bash
# make-dir-tree: the exact tree under shop/ and the file contents.
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
[ -d shop ] || fail "shop/ does not exist"
got=$(cd shop && find . -mindepth 1 | sort | tr '\n' ' ')
expected="./README.md ./docs ./docs/api ./src ./src/shop ./src/shop/__init__.py ./src/shop/cli.py ./tests "
[ "$got" = "$expected" ] || fail "shop/ holds [$got], expected [$expected]"
[ -d shop/tests ] && [ -d shop/docs/api ] || fail "shop/tests and shop/docs/api must be directories"
[ "$(cat shop/README.md)" = "# shop" ] || fail "shop/README.md must contain '# shop'"
[ "$(cat shop/src/shop/__init__.py)" = '__version__ = "0.1.0"' ] || fail 'shop/src/shop/__init__.py must contain __version__ = "0.1.0"'
[ -f shop/src/shop/cli.py ] && [ ! -s shop/src/shop/cli.py ] || fail "shop/src/shop/cli.py must be an empty file"
[ "$(cat unrelated.txt)" = "keep me" ] || fail "unrelated.txt changed"
echo PASS
