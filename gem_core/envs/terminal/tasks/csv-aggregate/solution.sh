{ echo "region,revenue"; awk -F, 'NR > 1 { sum[$1] += $3 * $4 } END { for (r in sum) printf "%s,%.2f\n", r, sum[r] }' sales.csv | sort; } > totals.csv
