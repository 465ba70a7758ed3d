sed 's/^[[:space:]]*//; s/[[:space:]]*$//' emails.txt | tr '[:upper:]' '[:lower:]' | grep -v '^$' | LC_ALL=C sort -u > unique.txt
