#!/bin/bash
# archive-extract: the extracted tree and the exact member list of configs.tar.gz.
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
[ -f extracted/etc/app.conf ] || fail "extracted/etc/app.conf is missing (extract into extracted/)"
[ -f extracted/bin/start ] && [ -f extracted/share/README ] || fail "extracted/ is incomplete"
[ "$(cat extracted/etc/app.d/pool.conf)" = "workers = 4" ] || fail "extracted/etc/app.d/pool.conf has the wrong content"
[ -f configs.tar.gz ] || fail "configs.tar.gz does not exist"
members=$(tar -tzf configs.tar.gz 2>/dev/null) || fail "configs.tar.gz is not a gzip-compressed tar archive"
files=$(printf '%s\n' "$members" | grep -v '/$' | sed 's#^\./##' | sort)
expected=$(printf '%s\n' etc/app.conf etc/app.d/logging.conf etc/app.d/pool.conf)
[ "$files" = "$expected" ] || fail "configs.tar.gz holds [$(echo $files)], expected [$(echo $expected)]"
scratch=$(mktemp -d)
tar -xzf configs.tar.gz -C "$scratch" || fail "configs.tar.gz does not extract"
[ "$(cat "$scratch/etc/app.d/logging.conf")" = "level = debug" ] || fail "etc/app.d/logging.conf has the wrong content in configs.tar.gz"
echo PASS
