#!/bin/bash
# sort-dedup: 14 lines, 6 distinct addresses.
set -eu
printf '%s\n' \
    "zoe@example.org" \
    "  Alice@Example.com" \
    "bob@example.com  " \
    "" \
    "ALICE@example.com" \
    "carol.smith@example.net" \
    "Bob@Example.com" \
    "	zoe@example.org" \
    "" \
    "dave+news@example.com" \
    "Carol.Smith@example.NET" \
    "   " \
    "erin_1@example.com" \
    "dave+news@EXAMPLE.com" > emails.txt
