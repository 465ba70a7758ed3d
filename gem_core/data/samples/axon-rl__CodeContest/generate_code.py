"""Generate the code samples of gem-core: small programming problems with tests, written for GEM.

Each problem has a statement, a reference solution written here, and a seeded input
generator; the expected outputs are what the reference solution prints (stdin/stdout
problems) or returns (function-call problems), so the tests are right by construction.
Outputs: axon-rl__CodeContest/{train,test}.jsonl, axon-rl__TACO-8k/train.jsonl (tests as a
JSON string, like TACO) and axon-rl__PrimeIntellect-15k/train.jsonl; columns ``problem``,
``tests`` ({"inputs", "outputs"[, "fn_name"]}), ``solution`` (the reference) and ``name``.

Run from the repository root: ``python gem_core/data/samples/axon-rl__CodeContest/generate_code.py``.
"""

from __future__ import annotations

import contextlib
import io
import json
import random
import sys
from pathlib import Path

TESTS_PER_PROBLEM = 5


def ints(rng, n, lo=-50, hi=50):
    return [rng.randint(lo, hi) for _ in range(n)]


def words(rng, n):
    return [rng.choice(["apple", "river", "stone", "cloud", "ember", "maple", "orbit", "quill", "tiger",
                        "violet", "wander", "zephyr", "a", "to", "noon", "level"]) for _ in range(n)]


def line_list(rng, lo=1, hi=9, vlo=-50, vhi=50):
    xs = ints(rng, rng.randint(lo, hi), vlo, vhi)
    return f"{len(xs)}\n{' '.join(map(str, xs))}\n"


# (name, statement, solution, input generator) for stdin/stdout problems.
STDIO = [
    ("sum_numbers", "Given N and then N integers, print their sum.",
     "n = int(input())\nprint(sum(map(int, input().split())))", line_list),
    ("reverse_words", "Given a line of words separated by single spaces, print the words in reverse order.",
     "print(' '.join(input().split()[::-1]))", lambda r: " ".join(words(r, r.randint(1, 7))) + "\n"),
    ("maximum", "Given N and then N integers, print the largest one.",
     "input()\nprint(max(map(int, input().split())))", line_list),
    ("count_vowels", "Given a line of lowercase letters and spaces, print how many vowels (a, e, i, o, u) it has.",
     "print(sum(c in 'aeiou' for c in input()))", lambda r: " ".join(words(r, r.randint(1, 6))) + "\n"),
    ("fizzbuzz", "Given N, print the numbers 1..N one per line, but Fizz for multiples of 3, Buzz for multiples of 5 and FizzBuzz for multiples of both.",
     "for i in range(1, int(input()) + 1):\n    print('FizzBuzz' if i % 15 == 0 else 'Fizz' if i % 3 == 0 else 'Buzz' if i % 5 == 0 else i)",
     lambda r: f"{r.randint(1, 30)}\n"),
    ("factorial_mod", "Given N (0 <= N <= 1000), print N! modulo 1000000007.",
     "n = int(input())\nf = 1\nfor i in range(2, n + 1):\n    f = f * i % 1000000007\nprint(f)", lambda r: f"{r.randint(0, 1000)}\n"),
    ("prime_queries", "Given T and then T integers (one per line), print YES for each prime and NO otherwise.",
     "def p(n):\n    if n < 2:\n        return False\n    i = 2\n    while i * i <= n:\n        if n % i == 0:\n            return False\n        i += 1\n    return True\nfor _ in range(int(input())):\n    print('YES' if p(int(input())) else 'NO')",
     lambda r: (lambda xs: f"{len(xs)}\n" + "".join(f"{x}\n" for x in xs))(ints(r, r.randint(1, 6), 0, 200))),
    ("gcd", "Given two positive integers a and b on one line, print their greatest common divisor.",
     "import math\na, b = map(int, input().split())\nprint(math.gcd(a, b))", lambda r: f"{r.randint(1, 10**6)} {r.randint(1, 10**6)}\n"),
    ("sort_numbers", "Given N and then N integers, print them in ascending order separated by spaces.",
     "input()\nprint(*sorted(map(int, input().split())))", line_list),
    ("palindrome", "Given a word, print YES if it reads the same backwards and NO otherwise.",
     "s = input().strip()\nprint('YES' if s == s[::-1] else 'NO')", lambda r: r.choice(["level", "noon", "abcba", "abca", "racecar", "stone", "x"]) + "\n"),
    ("count_distinct", "Given N and then N integers, print how many different values there are.",
     "input()\nprint(len(set(input().split())))", lambda r: line_list(r, 1, 12, 0, 6)),
    ("fibonacci_mod", "Given N (1 <= N <= 10000), print the N-th Fibonacci number (F1 = F2 = 1) modulo 1000000007.",
     "n = int(input())\na, b = 1, 1\nfor _ in range(n - 1):\n    a, b = b, (a + b) % 1000000007\nprint(a)", lambda r: f"{r.randint(1, 10000)}\n"),
    ("second_largest", "Given N and then N integers with at least two different values, print the second largest different value.",
     "input()\nprint(sorted(set(map(int, input().split())))[-2])", lambda r: f"4\n{r.randint(0, 5)} {r.randint(6, 9)} {r.randint(0, 9)} {r.randint(0, 9)}\n"),
    ("prefix_sums", "Given N and then N integers, print the N prefix sums separated by spaces.",
     "import itertools\ninput()\nprint(*itertools.accumulate(map(int, input().split())))", line_list),
    ("count_words", "Given several lines of text, print how many words (runs of non-space characters) they hold in total.",
     "import sys\nprint(len(sys.stdin.read().split()))", lambda r: "\n".join(" ".join(words(r, r.randint(0, 5))) for _ in range(r.randint(1, 4))) + "\n"),
    ("binary", "Given a non-negative integer N, print it in binary without leading zeros.",
     "print(bin(int(input()))[2:])", lambda r: f"{r.randint(0, 10**9)}\n"),
    ("digit_sum", "Given a non-negative integer N (up to 100 digits), print the sum of its digits.",
     "print(sum(map(int, input().strip())))", lambda r: str(r.randint(0, 10**r.randint(1, 100))) + "\n"),
    ("transpose", "Given R and C and then an R x C matrix of integers, print its transpose (C lines of R numbers).",
     "r, c = map(int, input().split())\nm = [input().split() for _ in range(r)]\nfor row in zip(*m):\n    print(*row)",
     lambda r: (lambda R, C: f"{R} {C}\n" + "".join(" ".join(map(str, ints(r, C, 0, 9))) + "\n" for _ in range(R)))(r.randint(1, 4), r.randint(1, 4))),
    ("running_max", "Given N and then N integers, print the maximum of each prefix, separated by spaces.",
     "import itertools\ninput()\nprint(*itertools.accumulate(map(int, input().split()), max))", line_list),
    ("caesar", "Given K and then a line of lowercase letters and spaces, shift each letter K places forward in the alphabet (wrapping around) and print the line.",
     "k = int(input())\nprint(''.join(chr((ord(c) - 97 + k) % 26 + 97) if c.isalpha() else c for c in input()))",
     lambda r: f"{r.randint(0, 30)}\n" + " ".join(words(r, r.randint(1, 4))) + "\n"),
    ("count_char", "Given a character on the first line and a text on the second, print how many times the character occurs in the text.",
     "c = input()\nprint(input().count(c))", lambda r: r.choice("aeot") + "\n" + " ".join(words(r, r.randint(1, 6))) + "\n"),
    ("longest_run", "Given a string, print the length of its longest block of equal consecutive characters.",
     "import itertools\nprint(max(len(list(g)) for _, g in itertools.groupby(input().strip())))",
     lambda r: "".join(r.choice("ab") * r.randint(1, 4) for _ in range(r.randint(1, 6))) + "\n"),
    ("inversions", "Given N and then N integers, print the number of pairs i < j with a[i] > a[j].",
     "n = int(input())\na = list(map(int, input().split()))\nprint(sum(a[i] > a[j] for i in range(n) for j in range(i + 1, n)))", line_list),
    ("median", "Given an odd N and then N integers, print their median.",
     "n = int(input())\nprint(sorted(map(int, input().split()))[n // 2])",
     lambda r: (lambda xs: f"{len(xs)}\n{' '.join(map(str, xs))}\n")(ints(r, r.choice([1, 3, 5, 7, 9])))),
    ("title_case", "Given a line of lowercase words, print it with the first letter of every word capitalised.",
     "print(' '.join(w.capitalize() for w in input().split()))", lambda r: " ".join(words(r, r.randint(1, 6))) + "\n"),
    ("coins", "Given an amount in cents, print the fewest coins of 1, 5, 10 and 25 cents that make it.",
     "n = int(input())\nc = 0\nfor d in (25, 10, 5, 1):\n    c += n // d\n    n %= d\nprint(c)", lambda r: f"{r.randint(0, 1000)}\n"),
    ("power_mod", "Given a, b and m on one line, print a to the power b modulo m.",
     "a, b, m = map(int, input().split())\nprint(pow(a, b, m))", lambda r: f"{r.randint(0, 10**9)} {r.randint(0, 10**9)} {r.randint(1, 10**9)}\n"),
    ("pairs_with_sum", "Given N and K and then N integers, print how many pairs i < j have a[i] + a[j] = K.",
     "n, k = map(int, input().split())\na = list(map(int, input().split()))\nprint(sum(a[i] + a[j] == k for i in range(n) for j in range(i + 1, n)))",
     lambda r: (lambda xs: f"{len(xs)} {r.randint(0, 10)}\n{' '.join(map(str, xs))}\n")(ints(r, r.randint(1, 10), 0, 10))),
    ("rotate", "Given N and K and then N integers, rotate the list K places to the right and print it.",
     "n, k = map(int, input().split())\na = input().split()\nk %= n\nprint(*(a[-k:] + a[:-k] if k else a))",
     lambda r: (lambda xs: f"{len(xs)} {r.randint(0, 20)}\n{' '.join(map(str, xs))}\n")(ints(r, r.randint(1, 8)))),
    ("triangle", "Given N, print a right triangle of N lines where line i holds i stars.",
     "for i in range(1, int(input()) + 1):\n    print('*' * i)", lambda r: f"{r.randint(1, 8)}\n"),
    ("anagrams", "Given two words on one line, print YES if one is an anagram of the other and NO otherwise.",
     "a, b = input().split()\nprint('YES' if sorted(a) == sorted(b) else 'NO')",
     lambda r: r.choice(["listen silent", "stone notes", "apple paple", "river diver", "ab ba", "abc abd"]) + "\n"),
    ("mean", "Given N and then N integers, print their mean with exactly two digits after the decimal point.",
     "n = int(input())\nprint(f'{sum(map(int, input().split())) / n:.2f}')", line_list),
    ("lcm", "Given N and then N positive integers, print their least common multiple.",
     "import math\ninput()\nl = 1\nfor x in map(int, input().split()):\n    l = l * x // math.gcd(l, x)\nprint(l)", lambda r: line_list(r, 1, 6, 1, 30)),
    ("dedupe", "Given N and then N integers, print them with repeated values removed, keeping first occurrences in order.",
     "input()\nprint(*dict.fromkeys(input().split()))", lambda r: line_list(r, 1, 12, 0, 5)),
    ("max_subarray", "Given N and then N integers, print the largest sum of a non-empty contiguous block.",
     "input()\nbest = cur = None\nfor x in map(int, input().split()):\n    cur = x if cur is None or cur < 0 else cur + x\n    best = cur if best is None else max(best, cur)\nprint(best)", line_list),
    ("islands", "Given R and C and then R lines of C characters ('#' land, '.' water), print the number of islands (groups of land cells joined up, down, left or right).",
     "r, c = map(int, input().split())\ng = [list(input().strip()) for _ in range(r)]\nn = 0\nfor i in range(r):\n    for j in range(c):\n        if g[i][j] == '#':\n            n += 1\n            st = [(i, j)]\n            g[i][j] = '.'\n            while st:\n                y, x = st.pop()\n                for dy, dx in ((1, 0), (-1, 0), (0, 1), (0, -1)):\n                    a, b = y + dy, x + dx\n                    if 0 <= a < r and 0 <= b < c and g[a][b] == '#':\n                        g[a][b] = '.'\n                        st.append((a, b))\nprint(n)",
     lambda r: (lambda R, C: f"{R} {C}\n" + "".join("".join(r.choice("#..") for _ in range(C)) + "\n" for _ in range(R)))(r.randint(1, 6), r.randint(1, 6))),
    ("brackets", "Given a string of brackets ()[]{}, print YES if it is balanced and NO otherwise.",
     "s = input().strip()\nst = []\nok = True\nfor ch in s:\n    if ch in '([{':\n        st.append(ch)\n    elif not st or '([{'[')]}'.index(ch)] != st.pop():\n        ok = False\n        break\nprint('YES' if ok and not st else 'NO')",
     lambda r: r.choice(["()", "([]{})", "(]", "((", "{[()()]}", "())(", "[", "[{}]()"]) + "\n"),
    ("fahrenheit", "Given a temperature in whole degrees Celsius, print it in Fahrenheit rounded down to an integer.",
     "c = int(input())\nprint((c * 9) // 5 + 32)", lambda r: f"{r.randint(-100, 100)}\n"),
    ("run_length", "Given a string of letters, print its run-length encoding: each block of equal letters as the letter followed by the block length.",
     "import itertools\nprint(''.join(k + str(len(list(g))) for k, g in itertools.groupby(input().strip())))",
     lambda r: "".join(r.choice("abc") * r.randint(1, 5) for _ in range(r.randint(1, 5))) + "\n"),
    ("count_primes", "Given N (N <= 100000), print how many primes are at most N.",
     "n = int(input())\ns = bytearray([1]) * (n + 1)\ns[:2] = b'\\x00\\x00'[: n + 1]\nfor i in range(2, int(n ** 0.5) + 1):\n    if s[i]:\n        s[i * i :: i] = bytearray(len(s[i * i :: i]))\nprint(sum(s))",
     lambda r: f"{r.randint(0, 100000)}\n"),
    ("product_mod", "Given N and then N integers, print their product modulo 1000000007 (as a number in 0..1000000006).",
     "input()\np = 1\nfor x in map(int, input().split()):\n    p = p * x % 1000000007\nprint(p)", line_list),
    ("evens", "Given N and then N integers, print the even ones in their order, separated by spaces (an empty line if there are none).",
     "input()\nprint(*[x for x in input().split() if int(x) % 2 == 0])", line_list),
    ("swap_case", "Given a line of text, print it with upper-case letters made lower-case and lower-case letters made upper-case.",
     "print(input().swapcase())", lambda r: " ".join(w.capitalize() if r.random() < 0.5 else w for w in words(r, r.randint(1, 5))) + "\n"),
    ("grid_paths", "Given R and C, print the number of paths from the top-left to the bottom-right cell of an R x C grid moving only right or down, modulo 1000000007.",
     "import math\nr, c = map(int, input().split())\nprint(math.comb(r + c - 2, r - 1) % 1000000007)", lambda r: f"{r.randint(1, 500)} {r.randint(1, 500)}\n"),
    ("sum_to_hundred", "This problem has no input. Print the sum of the integers from 1 to 100.",
     "print(sum(range(1, 101)))", lambda r: ""),
]

# (name, statement, solution, fn_name, argument generator) for function-call problems.
CALLS = [
    ("two_sum", "Write two_sum(nums, target) returning the indices [i, j] (i < j) of the only pair (the numbers are distinct powers of two) of numbers that add up to target.",
     "def two_sum(nums, target):\n    seen = {}\n    for j, x in enumerate(nums):\n        if target - x in seen:\n            return [seen[target - x], j]\n        seen[x] = j",
     "two_sum", lambda r: (lambda xs, i, j: [xs, xs[i] + xs[j]])(r.sample([1, 2, 4, 8, 16, 32, 64, 128, 256, 512], 6), 1, 4)),
    ("is_palindrome", "Write is_palindrome(s) returning True when s reads the same backwards, ignoring case and non-letters.",
     "def is_palindrome(s):\n    t = [c.lower() for c in s if c.isalpha()]\n    return t == t[::-1]",
     "is_palindrome", lambda r: [r.choice(["Never odd or even", "Level", "stone", "A man, a plan", "Was it a rat I saw?", "ab"])]),
    ("merge_sorted", "Write merge_sorted(a, b) returning the sorted merge of two sorted lists.",
     "def merge_sorted(a, b):\n    return sorted(a + b)", "merge_sorted",
     lambda r: [sorted(ints(r, r.randint(0, 5))), sorted(ints(r, r.randint(0, 5)))]),
    ("count_letters", "Write count_letters(s) returning a dict mapping each letter of s to how many times it occurs.",
     "def count_letters(s):\n    d = {}\n    for c in s:\n        if c.isalpha():\n            d[c] = d.get(c, 0) + 1\n    return d", "count_letters",
     lambda r: [" ".join(words(r, r.randint(1, 3)))]),
    ("climb_stairs", "Write climb_stairs(n) returning the number of ways to climb n steps taking 1 or 2 steps at a time.",
     "def climb_stairs(n):\n    a, b = 1, 1\n    for _ in range(n):\n        a, b = b, a + b\n    return a", "climb_stairs", lambda r: [r.randint(0, 60)]),
    ("flatten", "Write flatten(items) returning the integers of an arbitrarily nested list, in order, as one flat list.",
     "def flatten(items):\n    out = []\n    for x in items:\n        out.extend(flatten(x) if isinstance(x, list) else [x])\n    return out", "flatten",
     lambda r: [[1, [2, [3, r.randint(4, 9)]], [], [[r.randint(0, 3)]]]]),
]


def run_stdio(solution: str, stdin: str) -> str:
    out = io.StringIO()
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(solution, "<solution>", "exec"), {"__name__": "__main__"})
    finally:
        sys.stdin = old
    return out.getvalue()


def run_call(solution: str, fn_name: str, args: list):
    ns: dict = {}
    exec(compile(solution, "<solution>", "exec"), ns)
    return json.loads(json.dumps(ns[fn_name](*args)))


def example(inp: str, out: str) -> str:
    return f"\n\nExample input:\n{inp.rstrip() or '(none)'}\n\nExample output:\n{out.rstrip()}"


def build() -> list[dict]:
    rows = []
    for k, (name, statement, solution, gen) in enumerate(STDIO):
        rng = random.Random(k)
        inputs = [gen(rng) for _ in range(TESTS_PER_PROBLEM if name != "sum_to_hundred" else 1)]
        outputs = [run_stdio(solution, i) for i in inputs]
        rows.append({"name": name, "problem": statement + example(inputs[0], outputs[0]),
                     "tests": {"inputs": inputs, "outputs": outputs}, "solution": solution})
    for k, (name, statement, solution, fn_name, gen) in enumerate(CALLS):
        rng = random.Random(1000 + k)
        inputs = [gen(rng) for _ in range(TESTS_PER_PROBLEM)]
        outputs = [run_call(solution, fn_name, i) for i in inputs]
        call = f"{fn_name}({', '.join(json.dumps(a) for a in inputs[0])})"
        rows.append({"name": name, "problem": f"{statement}\n\nExample: {call} returns {json.dumps(outputs[0])}.",
                     "tests": {"inputs": inputs, "outputs": outputs, "fn_name": fn_name}, "solution": solution})
    return rows


def write(path: Path, rows: list[dict]) -> None:
    path.parent.mkdir(exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    rows = build()
    root = Path(__file__).resolve().parent.parent
    write(root / "axon-rl__CodeContest" / "train.jsonl", rows)
    write(root / "axon-rl__CodeContest" / "test.jsonl", rows[::3])
    write(root / "axon-rl__TACO-8k" / "train.jsonl", [{**r, "tests": json.dumps(r["tests"])} for r in rows])
    write(root / "axon-rl__PrimeIntellect-15k" / "train.jsonl", rows)
    print(len(rows), "problems;", sum("fn_name" in r["tests"] for r in rows), "function-call")


if __name__ == "__main__":
    main()
