#!/bin/bash
# fix-permissions: files with the wrong modes.
set -eu
mkdir -p scripts/deploy secrets
for f in scripts/build.sh scripts/test.sh scripts/deploy/push.sh; do
    printf '#!/bin/bash\necho %s\n' "$f" > "$f"
    chmod 644 "$f"
done
echo "remember to run build.sh first" > scripts/notes.txt
chmod 644 scripts/notes.txt
echo "api-key-123" > secrets/api.key
echo "hunter2" > secrets/db.password
chmod 666 secrets/api.key
chmod 644 secrets/db.password
chmod 755 secrets
echo "Project readme" > README.txt
chmod 664 README.txt
