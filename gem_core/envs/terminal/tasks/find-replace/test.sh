#!/bin/bash
# find-replace: exact expected counts after the rename.
export LC_ALL=C
fail() { echo "FAIL: $*"; exit 1; }
left=$(grep -rwo 'fetch_data' src docs | wc -l)
[ "$left" -eq 0 ] || fail "$left whole-word fetch_data left under src/ or docs/"
new=$(grep -rwo 'load_records' src docs | wc -l)
[ "$new" -eq 9 ] || fail "found $new load_records, expected 9"
cache=$(grep -ro 'fetch_data_cache' src docs | wc -l)
[ "$cache" -eq 4 ] || fail "fetch_data_cache occurs $cache times, expected 4 (it must not be renamed)"
grep -q 'def prefetch_data():' src/app/store.py || fail "prefetch_data was renamed"
grep -q 'def fetch_data():  # third-party code: do not touch' vendor/client.py || fail "vendor/ changed"
[ "$(grep -rc . vendor | cut -d: -f2)" = "2" ] || fail "vendor/client.py changed"
grep -q '^def load_records(query):$' src/app/store.py || fail "the definition in src/app/store.py was not renamed"
echo PASS
