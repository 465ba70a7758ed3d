#!/bin/bash
# fix-shell-script: word splitting on names with spaces and a misspelt variable.
set -eu
mkdir -p notes
echo "buy milk" > "notes/shopping list.txt"
echo "call bob" > notes/todo.txt
echo "draft" > "notes/ideas for  the talk.txt"
echo "not a note" > notes/image.png
cat > backup.sh <<'SH'
#!/bin/bash
set -e
src=notes
dest=backup
mkdir -p $dest
count=0
for f in $(ls $src/*.txt); do
    cp $f $dset/
    count=$((count + 1))
done
echo "backed up $count files"
SH
