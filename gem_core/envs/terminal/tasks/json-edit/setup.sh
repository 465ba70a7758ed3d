#!/bin/bash
# json-edit: a small nested config.
set -eu
cat > config.json <<'JSON'
{
  "name": "inventory-service",
  "version": "1.4.2",
  "features": ["search", "export"],
  "deprecated": {"legacy_api": true},
  "servers": [
    {"host": "alpha.internal", "port": 8080, "tls": false},
    {"host": "beta.internal", "port": 9090, "tls": false},
    {"host": "gamma.internal", "port": 8080, "tls": false, "weight": 2}
  ],
  "limits": {"requests_per_minute": 600, "burst": 50}
}
JSON
