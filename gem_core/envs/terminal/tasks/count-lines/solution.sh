find data -type f -name '*.txt' -print0 | xargs -0 cat | wc -l > count.txt
