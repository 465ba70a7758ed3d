"""`gem_core.sandbox.isolation`: the one isolation layer of `Sandbox` and `Shell`."""

from __future__ import annotations

import os
import warnings

import pytest

from gem_core.errors import InvalidArgument, ReducedIsolationWarning
from gem_core.sandbox import Sandbox, isolation
from gem_core.sandbox.shell import Shell

pytestmark = pytest.mark.timeout(120)

ISOLATION, WHY_NOT = isolation.detect_isolation()
requires_bwrap = pytest.mark.skipif(
    ISOLATION != "bwrap",
    reason=f"bubblewrap does not work here ({WHY_NOT.get('bwrap', 'unknown')}): masking cannot be "
           "tested (apt-get install bubblewrap)",
)


def _dir_under_usr_with_subdir() -> tuple[str, str]:
    for name in sorted(os.listdir("/usr/share")):
        path = os.path.join("/usr/share", name)
        if not os.path.isdir(path) or os.path.islink(path):
            continue
        for sub in sorted(os.listdir(path)):
            inner = os.path.join(path, sub)
            if os.path.isdir(inner) and not os.path.islink(inner):
                return path, inner
    pytest.skip("no directory with a subdirectory under /usr/share")


def test_one_decision_one_warning_per_owner(monkeypatch):
    monkeypatch.setattr(isolation, "detect_isolation",
                        lambda: ("rlimits", {"bwrap": "not installed", "netns": "not permitted"}))
    monkeypatch.setattr(isolation, "_WARNED", set())
    with pytest.warns(ReducedIsolationWarning) as caught:
        first, second = Sandbox(size=1), Sandbox(size=1)
        shells = [Shell(timeout_s=1), Shell(timeout_s=1)]
    try:
        messages = [str(w.message) for w in caught if w.category is ReducedIsolationWarning]
        assert len(messages) == 2, messages
        assert messages[0].startswith("gem_core.sandbox.Sandbox: bubblewrap is unavailable "
                                      "(bwrap: not installed; netns: not permitted), so sandboxed code runs")
        assert messages[1].startswith("gem_core.sandbox.Shell: bubblewrap is unavailable "
                                      "(bwrap: not installed; netns: not permitted), so shell commands run")
        assert all("apt-get install bubblewrap" in m for m in messages)
        assert {first.isolation, second.isolation} | {sh.isolation for sh in shells} == {"rlimits"}
    finally:
        first.close()
        second.close()
        for sh in shells:
            sh.close()


@pytest.mark.parametrize("make", [lambda: Sandbox(size=1, isolation="docker"),
                                  lambda: Shell(isolation="docker")])
def test_an_unknown_level_is_refused_by_both(make):
    with pytest.raises(InvalidArgument,
                       match=r"\(isolation=\.\.\.\) expects 'auto', 'bwrap', 'netns' or 'rlimits', got 'docker'"):
        make()


def test_shell_and_sandbox_mark_a_cut_alike():
    expected = "A" * 500 + "\n... [800 bytes truncated] ...\n" + "C" * 500
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReducedIsolationWarning)
        sb, sh = Sandbox(size=1, max_output_bytes=1000), Shell(max_output_bytes=1000, timeout_s=10)
    try:
        assert sb.run("print('A' * 500 + 'B' * 800 + 'C' * 500, end='')").stdout == expected
        sh.reset_workspace()
        result = sh.run("printf 'A%.0s' $(seq 500); printf 'B%.0s' $(seq 800); printf 'C%.0s' $(seq 500)")
        assert result.truncated and result.output == expected, result
    finally:
        sb.close()
        sh.close()


def test_masked_dirs_keeps_the_outermost_only(monkeypatch):
    outer, inner = _dir_under_usr_with_subdir()
    monkeypatch.setattr(isolation, "package_dirs", lambda: [outer])
    monkeypatch.setenv("GEM_DATA_DIR", inner)
    for var in isolation.DATA_DIR_VARS[1:]:
        monkeypatch.delenv(var, raising=False)
    assert isolation.masked_dirs(["/usr"]) == [outer]
    assert isolation.masked_dirs(["/opt/elsewhere"]) == []


@requires_bwrap
def test_a_package_under_a_system_dir_is_masked_for_sandboxed_code_too(monkeypatch):
    """Regression: the Python pool masked gem_core only inside the Python installation it
    bound, so a package installed under /usr (a system Python's dist-packages) was readable
    by sandboxed code, as it had been for the shell before its fix."""
    outer, inner = _dir_under_usr_with_subdir()
    monkeypatch.setattr(isolation, "package_dirs", lambda: [outer])
    monkeypatch.setenv("GEM_DATA_DIR", inner)
    with Sandbox(size=1) as sb:
        result = sb.run(f"import os; print(len(os.listdir({outer!r})), os.path.exists({inner!r}))")
        assert result.stdout == "0 False\n", result


@requires_bwrap
def test_a_dataset_dir_inside_the_masked_package_does_not_break_the_shell(monkeypatch):
    """Regression: the shell masked nested directories one by one (a $GEM_DATA_DIR inside the
    masked package): bubblewrap could not mount inside the read-only mask and every command
    failed."""
    outer, inner = _dir_under_usr_with_subdir()
    monkeypatch.setattr(isolation, "package_dirs", lambda: [outer])
    monkeypatch.setenv("GEM_DATA_DIR", inner)
    with Shell(timeout_s=10) as sh:
        sh.reset_workspace()
        result = sh.run(f"ls -A {outer} | wc -l; echo ok")
        assert result.output == "0\nok\n", result


def test_other_installs_finds_every_copy_in_the_library_dirs_of_a_bound_dir(tmp_path):
    lib = tmp_path / "local" / "lib" / "python3.11" / "dist-packages"
    for name in ("gem_core", "gem_core-0.1.0.dist-info", "numpy"):
        (lib / name).mkdir(parents=True)
    (tmp_path / "lib" / "python3.12" / "site-packages" / "gem_core").mkdir(parents=True)
    found = isolation.other_installs([str(tmp_path)])
    assert found == sorted([str(lib / "gem_core"), str(lib / "gem_core-0.1.0.dist-info"),
                            str(tmp_path / "lib" / "python3.12" / "site-packages" / "gem_core")])
    masked = isolation.masked_dirs([str(tmp_path)])
    assert set(found) <= set(masked)
    assert isolation.other_installs([str(tmp_path / "nothing")]) == []


@requires_bwrap
@pytest.mark.skipif(os.geteuid() != 0, reason="writes a fake second install under /usr/local (root only)")
def test_a_second_install_under_usr_local_is_hidden_inside():
    """Regression (hostile output, part 2): with another gem-core copy under /usr/local
    (the system Python's), graded code could read its task tests and samples."""
    import glob
    import shutil

    libs = sorted(glob.glob("/usr/local/lib/python3*")) or pytest.skip("no /usr/local/lib/python3*")
    fake = os.path.join(libs[0], "dist-packages", "gem_core-0.0.0+gemtest.dist-info")
    created_parent = not os.path.isdir(os.path.dirname(fake))
    os.makedirs(fake)
    try:
        with open(os.path.join(fake, "SECRET"), "w") as f:
            f.write("expected output of a task test\n")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with Shell(timeout_s=10) as sh:
                sh.reset_workspace()
                result = sh.run(f"cat {fake}/SECRET 2>&1; ls -A {fake} | wc -l")
        assert "expected output" not in result.output and result.output.endswith("0\n"), result.output
    finally:
        shutil.rmtree(fake if not created_parent else os.path.dirname(fake), ignore_errors=True)
