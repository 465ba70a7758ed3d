#!/bin/bash
# archive-extract: build incoming/bundle.tar.gz from a scratch tree, then drop the tree.
set -eu
scratch=$(mktemp -d)
mkdir -p "$scratch/etc/app.d" "$scratch/bin" "$scratch/share"
echo "port = 8080" > "$scratch/etc/app.conf"
echo "level = debug" > "$scratch/etc/app.d/logging.conf"
echo "workers = 4" > "$scratch/etc/app.d/pool.conf"
echo "#!/bin/sh" > "$scratch/bin/start"
echo "conf files are in etc/" > "$scratch/share/README"
echo "not a conf: app.conf.bak" > "$scratch/etc/app.conf.bak"
mkdir -p incoming
tar -czf incoming/bundle.tar.gz -C "$scratch" etc bin share
rm -rf "$scratch"
