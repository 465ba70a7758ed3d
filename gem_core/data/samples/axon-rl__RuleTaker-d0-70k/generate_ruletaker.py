"""Generate the RuleTaker-style samples of gem-core (all five depth dirs), written for GEM.

Each item is a small theory of facts and if-then rules about invented entities and a
statement; the answer is "True" (the statement follows from the theory), "False" (its
negation follows) or "Unknown" (neither follows). Labels come from forward chaining over
the theory, so they are correct by construction. Depth dN holds statements whose proof
needs at most N rule applications (most need exactly N).

Run from the repository root: ``python gem_core/data/samples/axon-rl__RuleTaker-d0-70k/generate_ruletaker.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

ENTITIES = ["the bear", "the cat", "the dog", "the mouse", "the squirrel", "the tiger",
            "Anne", "Bob", "Charlie", "Dave", "Erin", "Fiona", "Gary", "Harry"]
ATTRIBUTES = ["big", "blue", "cold", "furry", "green", "kind", "nice", "quiet", "red",
              "rough", "round", "smart", "white", "young"]
DEPTHS = (0, 1, 2, 3, 5)
ITEMS = 50

Lit = tuple[str, str, bool]  # (entity, attribute, positive)


def cap(s: str) -> str:
    return s[0].upper() + s[1:]


def say_fact(e: str, a: str, pos: bool) -> str:
    return f"{cap(e)} is {'' if pos else 'not '}{a}."


def say_rule(cond: list[tuple[str, bool]], concl: tuple[str, bool], who: str | None) -> str:
    subject = who or "something"
    parts = [f"{'' if p else 'not '}{a}" for a, p in cond]
    then = f"{'' if concl[1] else 'not '}{concl[0]}"
    pronoun = who or "it"
    return f"If {subject} is {' and '.join(parts)} then {pronoun} is {then}."


def closure(facts: set[Lit], rules: list) -> dict[Lit, int]:
    """Every derivable literal with the fewest rule applications that derive it."""
    known = {f: 0 for f in facts}
    changed = True
    while changed:
        changed = False
        for cond, concl, who in rules:
            for e in ENTITIES if who is None else [who]:
                depths = [known.get((e, a, p)) for a, p in cond]
                if any(d is None for d in depths):
                    continue
                lit = (e, concl[0], concl[1])
                d = max(depths) + 1
                if lit not in known or known[lit] > d:
                    known[lit] = d
                    changed = True
    return known


def make_item(rng: random.Random, depth: int) -> dict:
    while True:
        ents = rng.sample(ENTITIES, 3)
        facts: set[Lit] = set()
        rules: list = []
        main = ents[0]
        chain = rng.sample(ATTRIBUTES, depth + 1)
        facts.add((main, chain[0], True))
        for i in range(depth):
            extra = [] if rng.random() < 0.6 else [(rng.choice(ATTRIBUTES), True)]
            if extra:
                facts.add((main, extra[0][0], True))
            who = main if rng.random() < 0.3 else None
            pos = True if i < depth - 1 else rng.random() < 0.7
            rules.append(([(chain[i], True), *extra], (chain[i + 1], pos), who))
        for _ in range(rng.randint(2, 4)):  # distractor facts
            facts.add((rng.choice(ents), rng.choice(ATTRIBUTES), rng.random() < 0.8))
        for _ in range(rng.randint(1, 3)):  # distractor rules
            a, b = rng.sample(ATTRIBUTES, 2)
            rules.append(([(a, True)], (b, rng.random() < 0.8), None))
        known = closure(facts, rules)
        if any((e, a, not p) in known for e, a, p in known):
            continue  # contradictory theory
        if max(known.values()) > depth:
            continue  # a distractor made a deeper proof than this depth allows
        kind = rng.random()
        if kind < 0.2:  # a statement about which nothing follows
            e, a = rng.choice(ents), rng.choice(ATTRIBUTES)
            if (e, a, True) in known or (e, a, False) in known:
                continue
            stmt, label = (e, a, rng.random() < 0.7), "Unknown"
        else:
            target = (main, chain[-1]) if depth else (main, chain[0])
            pos = next(p for p in (True, False) if (main, target[1], p) in known)
            asked = pos if kind < 0.6 else not pos
            stmt, label = (main, target[1], asked), "True" if asked == pos else "False"
        sentences = [say_fact(*f) for f in sorted(facts)] + [say_rule(*r) for r in rules]
        rng.shuffle(sentences)
        question = (
            "Theory:\n" + "\n".join(sentences)
            + "\n\nBased only on the theory, is the following statement True, False, or Unknown?"
            + f"\nStatement: {say_fact(*stmt)}"
        )
        return {"question": question, "answer": label, "depth": depth}


def main() -> None:
    here = Path(__file__).resolve().parent.parent
    for depth in DEPTHS:
        rng = random.Random(1000 + depth)
        rows = [make_item(rng, depth) for _ in range(ITEMS)]
        out = here / f"axon-rl__RuleTaker-d{depth}-70k"
        out.mkdir(exist_ok=True)
        with (out / "train.jsonl").open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        labels = {k: sum(r["answer"] == k for r in rows) for k in ("True", "False", "Unknown")}
        print(out.name, labels)


if __name__ == "__main__":
    main()
