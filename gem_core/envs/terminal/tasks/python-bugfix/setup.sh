#!/bin/bash
# python-bugfix: a median that ignores the even case (and does not sort).
set -eu
cat > stats.py <<'PY'
"""Print the mean and median of the numbers in a file (one per line)."""

import sys


def mean(values):
    return sum(values) / len(values)


def median(values):
    middle = len(values) // 2
    return values[middle]


def main(path):
    with open(path) as f:
        values = [float(line) for line in f if line.strip()]
    print(f"mean={mean(values):g} median={median(values):g}")


if __name__ == "__main__":
    main(sys.argv[1])
PY
printf '%s\n' 4 1 3 2 > numbers.txt
