cat > backup.sh <<'SH'
#!/bin/bash
set -e
src=notes
dest=backup
mkdir -p "$dest"
count=0
for f in "$src"/*.txt; do
    [ -e "$f" ] || continue
    cp -- "$f" "$dest/"
    count=$((count + 1))
done
echo "backed up $count files"
SH
bash backup.sh
