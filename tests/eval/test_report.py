"""`gem report`: Markdown and PNG comparison of `gem eval` runs."""

from __future__ import annotations

import sys

import pytest

from gem_core.cli import main
from gem_core.errors import install_command
from gem_core.eval import evaluate
from gem_core.eval.report import report
from gem_core.rl.testing import TextPolicy

ECHO = "toy:Echo-v0"
GTN = "game:GuessTheNumber-v0-easy"


@pytest.fixture(scope="module")
def runs(tiny, tmp_path_factory):
    """Two runs of scripted policies: one that always echoes, one that echoes on turn 2."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny[1])

    def good(prompt: str) -> str:
        return prompt.split("nothing else: ")[1].split()[0].split("<")[0] if "nothing else" in prompt else "\\boxed{5}"

    def slow(prompt: str) -> str:
        if "nothing else" in prompt and prompt.count("<|im_start|>assistant") >= 2:
            return good(prompt)
        return "\\boxed{5}" if "Guess" in prompt else "no"

    root = tmp_path_factory.mktemp("runs")
    dirs = []
    for name, fn in (("good", good), ("slow", slow)):
        evaluate([ECHO, GTN], base_url="http://unused.invalid/v1", model=name, tokenizer=tiny[1],
                 episodes=4, policy=TextPolicy(tok, fn), progress=False, out_dir=root / name)
        dirs.append(root / name)
    return dirs


def test_report_compares_runs_with_plots_and_markdown(runs, tmp_path, capsys):
    out = tmp_path / "cmp"
    assert main(["report", *map(str, runs), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "good:" in printed and "slow:" in printed
    md = (out / "report.md").read_text()
    assert "## good\n" in md and "## slow\n" in md
    # Echo: the good policy solves every episode in 1 turn, the slow one in 2.
    assert f"| {ECHO} | 1.000 [0.510, 1.000] | 1.000 [0.510, 1.000] |" in md
    assert "![success](success.png)" in md
    for name in ("success.png", "turns_to_solve.png"):
        data = (out / name).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    res = report(runs, out, plots=False)
    turns = {r["label"]: r["summary"][ECHO]["mean_turns_to_solve"] for r in res["runs"]}
    assert turns == {"good": 1.0, "slow": 2.0}


def test_report_without_matplotlib_names_the_extra(runs, tmp_path, monkeypatch, capsys):
    for mod in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails
    out = tmp_path / "nompl"
    assert main(["report", str(runs[0]), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "'matplotlib' is not installed for the plots of `gem report`" in err
    assert install_command("eval") in err
    assert (out / "report.md").exists() and not (out / "success.png").exists()
    assert main(["report", str(runs[0]), "--out", str(out), "--no-plots"]) == 0


def test_report_on_a_directory_that_is_not_a_run(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "is not a gem eval run: no manifest.json in it" in capsys.readouterr().err


def test_importing_the_cli_and_eval_stays_light():
    import subprocess

    code = (
        "import sys, gem_core.cli, gem_core.eval, gem_core.eval.runner, gem_core.eval.report; "
        "heavy = [m for m in ('torch', 'transformers', 'matplotlib', 'tqdm') if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


class _Reply:
    def __init__(self, text):
        self.text = text

    async def chat(self, messages, sampling):
        from gem_core.rl.rollout import ChatResult

        return ChatResult(self.text, "stop", 1, 1)


class _Broken:
    async def chat(self, messages, sampling):
        raise RuntimeError("server gone")


def test_report_polish_labels_kwargs_rounding_zero_bars_and_permissions(tmp_path, capsys):
    kw = dict(api="chat", base_url="http://unused.invalid/v1", progress=False, episodes=3)
    a = tmp_path / "a"
    b = tmp_path / "b"
    c = tmp_path / "c"
    evaluate(ECHO, model="org/Some-Model-7B", policy=_Reply("nope"), out_dir=a, temperature=0.7,
             env_kwargs={"word_length": 3}, **kw)  # never solves: a 0 rate
    evaluate(ECHO, model="org/Some-Model-7B", policy=_Reply("nope"), out_dir=b, **kw)
    evaluate(ECHO, model="other/Model", policy=_Broken(), out_dir=c, max_consecutive_errors=0, **kw)
    out = tmp_path / "cmp"
    assert main(["report", str(a), str(b), str(c), "--out", str(out)]) == 0
    md = (out / "report.md").read_text()
    # Short labels; the run directory only where two runs share a model.
    assert "## Some-Model-7B (a)" in md and "## Some-Model-7B (b)" in md and "## Model\n" in md
    assert "org/" not in md.split("## Success rate by env")[1]
    assert '- env_kwargs: `{"word_length": 3}`' in md and "temperature 0.7," in md
    assert "0.7000000000000001" not in md
    assert f"| {ECHO} | 0.000 [0.000, 0.561] | 0.000 [0.000, 0.561] | - (3 errored) |" in md
    assert (out / "success.png").stat().st_size > 5000
    # Every file of a run directory gets the same mode (mkstemp alone made some 0600).
    modes = {f.name: f.stat().st_mode & 0o777 for f in a.iterdir()}
    assert len(set(modes.values())) == 1, modes


@pytest.mark.parametrize("num_runs", [1, 2, 3, 5])
def test_turns_legend_never_covers_a_bar(tmp_path, monkeypatch, num_runs):
    plt = pytest.importorskip("matplotlib.pyplot", reason="the plots need matplotlib (gem-core[eval])")
    from gem_core.eval import report as report_module

    # Every run solves all 40 episodes in 1 turn: the tallest bars, right where a legend goes.
    runs = [{"label": f"run-{k}-with-a-longish-name",
             "records": [{"env_id": ECHO, "num_turns": 1 + (i % 3 == 0) * k, "success": True} for i in range(40)]}
            for k in range(num_runs)]
    kept = []
    monkeypatch.setattr(plt, "close", kept.append)
    report_module._plot_turns(plt, runs, [ECHO], tmp_path / "turns.png")
    (fig,) = kept
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    (ax,) = fig.axes
    legend = ax.get_legend().get_window_extent(renderer)
    bars = [p.get_window_extent(renderer) for p in ax.patches]
    assert bars and not [b for b in bars if b.overlaps(legend)], "the legend covers a bar"
    plt.close(fig)
