#!/bin/bash
# json-edit: load config.json and compare it to the expected document.
export LC_ALL=C
# -I (isolated): the workspace is not on sys.path, so a planted json.py cannot stand in.
python3 -I - <<'PY'
import json
import sys

expected = {
    "name": "inventory-service",
    "version": "2.0.0",
    "features": ["search", "export", "audit-log"],
    "servers": [
        {"host": "alpha.internal", "port": 8443, "tls": True},
        {"host": "beta.internal", "port": 9090, "tls": False},
        {"host": "gamma.internal", "port": 8443, "tls": True, "weight": 2},
    ],
    "limits": {"requests_per_minute": 600, "burst": 50},
}
try:
    with open("config.json") as f:
        got = json.load(f)
except (OSError, ValueError) as e:
    print(f"FAIL: config.json cannot be read as JSON: {e}")
    sys.exit(1)
if got != expected:
    print("FAIL: config.json is", json.dumps(got, sort_keys=True))
    print("expected           ", json.dumps(expected, sort_keys=True))
    sys.exit(1)
print("PASS")
PY
