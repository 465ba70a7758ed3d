"""Generate the QA samples of gem-core: questions about an invented world, written for GEM.

A seeded generator invents towns (province, river, founding year, mayor) and people
(birth town, birth year, trade). From them it writes a small passage corpus (one passage
per town and per person, for the search tool) and two kinds of questions:

* single-hop ("In which town was Mira Dovel born?"), answered by one passage;
* two-hop, HotpotQA style ("Which river flows through the town where Mira Dovel was
  born?"), answered by chaining two passages.

Every name is made up from syllables; no row comes from a real dataset. Outputs:
axon-rl__NaturalQuestions/train.jsonl (problem, answer: str), axon-rl__HotpotQA/train.jsonl
(problem, answer: list), google-research-datasets__nq_open/validation.jsonl (question,
answer: list), axon-rl__search-eval/<split>.jsonl (question, answer: list; seven splits)
and axon-rl__search-eval/corpus.jsonl (id, title, text).

Run from the repository root: ``python gem_core/data/samples/axon-rl__NaturalQuestions/generate_qa.py``.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

SYL = ["bar", "dov", "el", "fen", "gar", "hal", "is", "kor", "lun", "mir", "nor", "os",
       "pel", "quin", "ros", "sel", "tam", "ul", "ven", "wyn", "yor", "zan"]
TRADES = ["glassblower", "cartographer", "clockmaker", "beekeeper", "shipwright", "astronomer",
          "weaver", "bookbinder", "potter", "lighthouse keeper", "botanist", "violin maker"]
PROVINCES = ["Ostmark", "Vellandria", "Kessory", "Daramoor", "Luneth"]
SEARCH_SPLITS = ["2wiki", "popqa", "tq", "hotpotqa", "bamboogle", "nq", "musique"]


def word(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(SYL) for _ in range(n)).capitalize()


def build_world(rng: random.Random):
    used: set[str] = set()

    def fresh(n: int) -> str:
        while True:
            w = word(rng, n)
            if w not in used and len(w) >= 4:
                used.add(w)
                return w

    towns = []
    for _ in range(14):
        towns.append({"name": fresh(2) + rng.choice(["by", "ford", "holm", "wick", "stead"]),
                      "province": rng.choice(PROVINCES), "river": fresh(2),
                      "founded": rng.randint(1100, 1850), "mayor": None})
    people = []
    for _ in range(24):
        people.append({"name": f"{fresh(2)} {fresh(2)}", "town": rng.choice(towns),
                       "born": rng.randint(1820, 1990), "trade": rng.choice(TRADES)})
    for town in towns:
        town["mayor"] = f"{fresh(2)} {fresh(2)}"
    return towns, people


def corpus(towns, people):
    docs = []
    for t in towns:
        docs.append({"title": t["name"], "text": (
            f"{t['name']} is a town in the province of {t['province']}. It was founded in "
            f"{t['founded']} on the banks of the {t['river']} River. The current mayor of "
            f"{t['name']} is {t['mayor']}.")})
    for p in people:
        docs.append({"title": p["name"], "text": (
            f"{p['name']} (born {p['born']}) is a {p['trade']} from {p['town']['name']}, where "
            f"{p['name'].split()[0]} was born and still works.")})
    return [{"id": str(i), **d} for i, d in enumerate(docs)]


def single_hop(rng, towns, people):
    qs = []
    for p in people:
        qs.append((f"In which town was {p['name']} born?", [p["town"]["name"]]))
        qs.append((f"What is the trade of {p['name']}?", [p["trade"], f"a {p['trade']}"]))
        qs.append((f"In what year was {p['name']} born?", [str(p["born"])]))
    for t in towns:
        qs.append((f"Which river flows through {t['name']}?", [f"{t['river']} River", t["river"]]))
        qs.append((f"In which province is the town of {t['name']}?", [t["province"]]))
        qs.append((f"Who is the mayor of {t['name']}?", [t["mayor"]]))
        qs.append((f"In what year was {t['name']} founded?", [str(t["founded"])]))
    rng.shuffle(qs)
    return qs


def two_hop(rng, people):
    qs = []
    for p in people:
        t = p["town"]
        qs.append((f"Which river flows through the town where {p['name']} was born?",
                   [f"{t['river']} River", t["river"]]))
        qs.append((f"In which province was {p['name']} born?", [t["province"]]))
        qs.append((f"Who is the mayor of the birthplace of {p['name']}?", [t["mayor"]]))
    rng.shuffle(qs)
    return qs


def write(path: Path, rows) -> None:
    path.parent.mkdir(exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def main() -> None:
    rng = random.Random(20250601)
    towns, people = build_world(rng)
    one, two = single_hop(rng, towns, people), two_hop(rng, people)
    root = Path(__file__).resolve().parent.parent
    write(root / "axon-rl__NaturalQuestions" / "train.jsonl",
          [{"problem": q, "answer": a[0]} for q, a in one[:50]])
    write(root / "axon-rl__HotpotQA" / "train.jsonl",
          [{"problem": q, "answer": a} for q, a in two[:50]])
    write(root / "google-research-datasets__nq_open" / "validation.jsonl",
          [{"question": q, "answer": a} for q, a in one[50:100]])
    mixed = one[100:] + two[50:]  # 28 + 22 questions, 7 per split
    rng.shuffle(mixed)
    for i, split in enumerate(SEARCH_SPLITS):
        write(root / "axon-rl__search-eval" / f"{split}.jsonl",
              [{"question": q, "answer": a} for q, a in mixed[i * 7:(i + 1) * 7]])
    write(root / "axon-rl__search-eval" / "corpus.jsonl", corpus(towns, people))
    print(len(one), "single-hop,", len(two), "two-hop questions;", len(towns) + len(people), "passages")


if __name__ == "__main__":
    main()
