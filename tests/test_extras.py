"""gem-core's extras co-resolve when installed one after another, in either order.

A user runs ``pip install -e ".[tasks,eval]"`` and later ``pip install -e ".[rl]"``. The
second install considers only what it is asked for: it keeps an installed package that
satisfies the request and changes one that does not, without regard for the installed
packages that need it — so the rl extra's transformers 4 once downgraded huggingface-hub
under datasets 5.1+ (which needs hub >= 1.31) and ``import datasets`` failed.

The test replays that with pip itself, without installing anything: pip's resolver (on the
package index) gives the first step's packages, which are written as installed metadata
(``.dist-info`` with their real ``Requires-Dist``) into an empty venv; pip then resolves the
second step in that venv, as it would on the user's machine; the changes it would make are
applied the same way, and ``pip check`` must find every installed requirement satisfied.
About a minute per order; skipped, with the reason, where the index cannot be reached.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

pytestmark = pytest.mark.timeout(900)


def _pip(target: Path, *args: str) -> subprocess.CompletedProcess:
    """This venv's pip, acting on the environment of ``target``'s python."""
    return subprocess.run([sys.executable, "-m", "pip", "--python", str(target), *args],
                          capture_output=True, text=True, timeout=600)


def _resolve(target: Path, extras: str, report: Path) -> list[dict]:
    proc = _pip(target, "install", "--dry-run", "--quiet", "--report", str(report), "-e", f"{REPO}[{extras}]")
    if proc.returncode != 0:
        if any(s in proc.stderr for s in ("NewConnectionError", "Network is unreachable", "Max retries",
                                           "Temporary failure in name resolution")):
            pytest.skip(f"the package index cannot be reached: {proc.stderr.strip().splitlines()[-1]}")
        pytest.fail(f"pip cannot resolve gem-core[{extras}] in this environment:\n{proc.stderr[-3000:]}")
    return json.loads(report.read_text())["install"]


def _site_packages(target: Path) -> Path:
    out = subprocess.run([str(target), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True)
    return Path(out.stdout.strip())


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _mark_installed(site: Path, installs: list[dict]) -> None:
    """Write each resolved package as installed metadata (replacing another version of it)."""
    for item in installs:
        meta = item["metadata"]
        name = _canonical(meta["name"])
        for old in site.glob("*.dist-info"):
            if _canonical(old.name.removesuffix(".dist-info").rsplit("-", 1)[0]) == name:
                shutil.rmtree(old)
        info = site / f"{meta['name'].replace('-', '_')}-{meta['version']}.dist-info"
        info.mkdir()
        lines = ["Metadata-Version: 2.1", f"Name: {meta['name']}", f"Version: {meta['version']}"]
        lines += [f"Provides-Extra: {e}" for e in meta.get("provides_extra") or []]
        lines += [f"Requires-Dist: {r}" for r in meta.get("requires_dist") or []]
        (info / "METADATA").write_text("\n".join(lines) + "\n")
        (info / "INSTALLER").write_text("gem-core-tests\n")
        (info / "RECORD").write_text("")


@pytest.mark.parametrize(("first", "then"), [("tasks,eval", "rl"), ("rl", "tasks,eval")])
def test_extras_installed_one_after_another_co_resolve(tmp_path, first, then):
    env = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env)  # empty: what a user's fresh venv holds
    python = env / "bin" / "python"
    site = _site_packages(python)
    step1 = _resolve(python, first, tmp_path / "step1.json")
    _mark_installed(site, step1)
    step2 = _resolve(python, then, tmp_path / "step2.json")  # pip prefers what is installed
    _mark_installed(site, step2)
    check = _pip(python, "check")
    changed = sorted(f"{i['metadata']['name']} {i['metadata']['version']}" for i in step2
                     if _canonical(i["metadata"]["name"]) != "gem-core")
    assert check.returncode == 0, (
        f"pip install .[{first}], then pip install .[{then}] (which changes {changed}) leaves "
        f"broken requirements:\n{check.stdout}{check.stderr}"
    )
    names = {_canonical(i["metadata"]["name"]) for i in step1 + step2}
    if "tasks" in first + then:  # the pair that broke: datasets beside the rl extra's transformers 4
        assert {"datasets", "huggingface-hub", "transformers"} <= names


RUNTIME_EXTRAS = ("rl", "mcp", "math", "reasoning", "datasets", "vision", "eval", "ray")


def _extra_distributions() -> dict[str, list[str]]:
    """Each runtime extra's distributions (``gem-core[...]`` references expanded)."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    name = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
    return {e: [name.match(r).group(0) for r in extras[e] if not r.startswith("gem-core")]
            for e in RUNTIME_EXTRAS}


def test_every_extras_packages_import_side_by_side():
    """All runtime extras installed together (the dev venv), every top-level module of
    every distribution they name imports in one fresh interpreter: a version pair that
    resolves but cannot load together (datasets beside an older huggingface-hub raised
    ``ImportError: BucketNotFoundError``) fails here, naming the extra."""
    import importlib.metadata as md

    modules: dict[str, str] = {}
    for extra, dists in _extra_distributions().items():
        for dist in dists:
            try:
                d = md.distribution(dist)
            except md.PackageNotFoundError:
                pytest.fail(f"gem-core[{extra}] names {dist}, which is not installed here "
                            "(the test venv installs gem-core[dev], which holds every extra)")
            top = (d.read_text("top_level.txt") or "").split()
            if not top:  # no top_level.txt (newer build backends): the files' first part
                top = sorted({f.parts[0].removesuffix(".py") for f in d.files or []
                              if f.parts and not f.parts[0].endswith((".dist-info", ".data"))
                              and (f.suffix == ".py" or len(f.parts) > 1) and f.parts[0] != ".."})
            for mod in top:
                if mod.isidentifier() and not mod.startswith("_"):
                    modules.setdefault(mod, f"gem-core[{extra}] ({dist})")
    assert {"torch", "transformers", "datasets", "huggingface_hub", "mcp", "math_verify", "ray"} <= set(modules)
    script = (
        "import importlib, json, sys\n"
        "bad = {}\n"
        "for m in json.loads(sys.argv[1]):\n"
        "    try:\n"
        "        importlib.import_module(m)\n"
        "    except Exception as exc:\n"
        "        bad[m] = f'{type(exc).__name__}: {exc}'[:300]\n"
        "print(json.dumps(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(sorted(modules))],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    bad = json.loads(proc.stdout.strip().splitlines()[-1])
    assert not bad, "\n".join(f"{modules[m]}: import {m}: {e}" for m, e in bad.items())


def test_runtime_extras_take_ranges_not_exact_pins():
    """A user's own torch (a GPU build, a trainer's pin) must be able to satisfy gem-core: exact
    pins live in integrations/constraints.txt (what the test venvs install with), not in the
    runtime extras."""
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    pinned = [f"gem-core[{e}]: {r}" for e in RUNTIME_EXTRAS for r in extras[e] if "==" in r or "===" in r]
    assert not pinned, f"exact pins in runtime extras: {pinned}"
    constraints = (REPO / "integrations" / "constraints.txt").read_text()
    assert re.search(r"^torch==", constraints, re.M), "the test venvs' CPU torch pin moved"
    assert "-c integrations/constraints.txt" in (REPO / "Makefile").read_text()
