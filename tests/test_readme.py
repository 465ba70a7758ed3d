"""The README agrees with the code: the adapter table with integrations/*, the Use snippet with what it prints."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# The trainer's distribution in each adapter's pinned test requirements.
TRAINER_DIST = {"verl": "verl", "trl": "trl", "rl2": "rl-square", "openrlhf": "openrlhf", "oat": "oat-llm"}


def _rows() -> dict[str, list[str]]:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Trainer adapters"):]
    section = section[:section.index("\n## ", 3)]
    rows = {}
    for line in section.splitlines():
        m = re.match(r"\| \[[^\]]+\]\(integrations/(\w+)/README\.md\) ", line)
        if m:
            rows[m[1]] = [c.strip() for c in line.strip("|").split("|")]
    return rows


def _pins(adapter: str) -> dict[str, str]:
    pins = {}
    for req in (REPO / "integrations" / adapter).glob("requirements-*.txt"):
        for line in req.read_text(encoding="utf-8").splitlines():
            m = re.match(r"([A-Za-z0-9_.\-]+)(?:\[[^\]]*\])?==([^\s;#]+)", line.strip())
            if m:
                pins[m[1].lower()] = m[2]
    return pins


def test_every_adapter_has_a_row_and_every_row_an_adapter():
    adapters = {p.parent.name for p in (REPO / "integrations").glob("*/pyproject.toml")}
    assert set(_rows()) == adapters


def test_each_row_names_the_package_version_recipe_and_target_that_exist():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    for adapter, cells in _rows().items():
        trainer, package, _cpu, _gpu, install, recipe, tests = cells
        pyproject = (REPO / "integrations" / adapter / "pyproject.toml").read_text()
        name = re.search(r'^name = "([^"]+)"', pyproject, re.M)[1]  # tomllib needs Python 3.11
        assert package == f"`{name}`", (adapter, package)
        assert f"integrations/{adapter}" in install, (adapter, install)
        if adapter in TRAINER_DIST:
            version = _pins(adapter)[TRAINER_DIST[adapter]]
            assert f" {version}" in trainer, f"{adapter}: the table says {trainer!r}, the tests pin {version}"
            deps = re.search(r"^dependencies = \[(.*)\]", pyproject, re.M)[1]
            assert TRAINER_DIST[adapter] in deps or adapter == "rl2", (adapter, deps)  # rl2: --no-deps
        else:  # ROLL: from source, at the commit its README names
            readme = (REPO / "integrations" / adapter / "README.md").read_text()
            commit = re.search(r"Tested against ROLL HEAD ([0-9a-f]{7})", readme)[1]
            assert commit in trainer, (adapter, trainer, commit)
        path = re.search(r"\(recipes/([\w.]+)\)", recipe)[1]
        assert (REPO / "recipes" / path).is_file(), recipe
        target = re.search(r"`make (test-\w+)`", tests)[1]
        assert target == f"test-{adapter}" and re.search(rf"^{target}:", makefile, re.M), tests


def test_the_use_snippet_runs_and_prints_what_its_comments_say(capsys):
    text = (REPO / "README.md").read_text(encoding="utf-8")
    use = text[text.index("## Use"):]
    code = use[use.index("```python\n") + 10:use.index("\n```", use.index("```python\n"))]
    exec(compile(code, "README.md (Use)", "exec"), {})
    out = capsys.readouterr().out
    assert "No guesses yet. Enter your first guess." in out
    assert "Turn 1: you guessed 5; the target is lower than 5." in out and "0.06 False False" in out
    assert "[0.06 1.   0.05 0.05 0.06 0.06 1.   1.  ] [False  True False False False False  True  True]" in out
