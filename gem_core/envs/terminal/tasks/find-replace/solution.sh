grep -rlw fetch_data src docs | while IFS= read -r f; do sed -i 's/\bfetch_data\b/load_records/g' "$f"; done
