#!/bin/bash
# find-replace: a small project mentioning fetch_data in several files.
set -eu
mkdir -p src/app docs vendor
cat > src/app/api.py <<'PY'
from app.store import fetch_data, fetch_data_cache


def handler(request):
    rows = fetch_data(request.query)
    return {"rows": rows, "cached": fetch_data_cache.size}
PY
cat > src/app/store.py <<'PY'
fetch_data_cache = {}


def fetch_data(query):
    """fetch_data: run the query."""
    return [query]


def prefetch_data():
    return fetch_data("warm-up")
PY
cat > src/main.sh <<'SH'
#!/bin/bash
python -c 'from app.store import fetch_data; print(fetch_data("x"))'
SH
cat > docs/usage.md <<'MD'
# Usage

Call `fetch_data(query)` to get rows. See also fetch_data_cache.
fetch_data returns a list.
MD
cat > vendor/client.py <<'PY'
def fetch_data():  # third-party code: do not touch
    return None
PY
