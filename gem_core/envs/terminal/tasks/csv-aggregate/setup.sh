#!/bin/bash
# csv-aggregate: 40 deterministic sales rows over 4 regions.
set -eu
{
    echo "region,product,units,unit_price"
    awk 'BEGIN {
        split("north south east west", regions, " ");
        split("widget gadget doohickey gizmo sprocket", products, " ");
        seed = 7;
        for (i = 1; i <= 40; i++) {
            seed = (seed * 1109 + 12345) % 65536;
            r = regions[(int(seed / 16384) % 4) + 1];
            p = products[(int(seed / 1024) % 5) + 1];
            units = (int(seed / 64) % 17) + 1;
            cents = 199 + (int(seed / 8) % 800);
            printf "%s,%s,%d,%d.%02d\n", r, p, units, int(cents / 100), cents % 100;
        }
    }'
} > sales.csv
