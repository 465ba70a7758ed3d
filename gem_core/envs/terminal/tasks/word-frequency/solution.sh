grep -oE '[A-Za-z]+' speech.txt | tr '[:upper:]' '[:lower:]' | LC_ALL=C sort | uniq -c | LC_ALL=C sort -k1,1nr -k2,2 | head -n 5 | awk '{ print $2, $1 }' > top5.txt
