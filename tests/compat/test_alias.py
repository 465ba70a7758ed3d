"""gem_core.compat.install_as_gem: ``import gem`` served by the compat layer when gem-llm is absent.

The test venv has gem-llm installed (for the bridge's tests), so each positive case runs in
a fresh interpreter where a finder first on ``sys.meta_path`` hides the ``gem`` package, as
if it were uninstalled; the refusal case runs with gem-llm visible.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

HIDE_GEM_LLM = """
import importlib.abc, sys
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "gem" or name.startswith("gem."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, Hide())
"""


def _run(code: str, *, hide: bool = True) -> subprocess.CompletedProcess:
    script = (HIDE_GEM_LLM if hide else "") + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)


def test_import_gem_resolves_to_the_compat_modules_themselves():
    out = _run(
        """
        import gem_core.compat as compat
        assert compat.install_as_gem() is compat.install_as_gem()  # idempotent
        import gem
        import gem.utils.parsing
        from gem.envs.registration import make
        from gem.wrappers.wrapper_factory import get_wrapper_fns
        import gem_core.compat.utils.parsing as parsing
        assert gem is compat and make is compat.make and gem.utils.parsing is parsing
        env = gem.make("game:GuessTheNumber-v0-easy", max_turns=1, seed=0)
        env.reset()
        _, _, terminated, truncated, _ = env.step("\\\\boxed{1}")
        assert terminated and truncated  # the reference's episode end
        print("OK")
        """
    )
    assert out.returncode == 0 and out.stdout.strip() == "OK", out.stderr[-3000:]


def test_a_path_the_compat_layer_lacks_names_it():
    out = _run(
        """
        import gem_core.compat as compat
        compat.install_as_gem()
        try:
            import gem.envs.no_such_module
        except ModuleNotFoundError as exc:
            assert exc.name == "gem.envs.no_such_module", exc.name
            print(exc)
        """
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "gem_core.compat (serving `import gem`) has no 'gem_core.compat.envs.no_such_module'" in out.stdout


def test_uninstall_forgets_the_alias():
    out = _run(
        """
        import sys
        import gem_core.compat as compat
        compat.install_as_gem()
        import gem.envs
        compat.uninstall_as_gem()
        assert "gem" not in sys.modules and "gem.envs" not in sys.modules
        try:
            import gem
        except ModuleNotFoundError:
            print("GONE")
        """
    )
    assert out.returncode == 0 and out.stdout.strip() == "GONE", out.stderr[-3000:]


def test_it_refuses_to_shadow_an_installed_gem_llm():
    import importlib.util

    import pytest

    if importlib.util.find_spec("gem") is None:
        pytest.skip("gem-llm is not installed here (tests/compat/requirements-gem-llm.txt)")
    out = _run(
        """
        import gem_core.compat as compat
        from gem_core.errors import UsageError
        try:
            compat.install_as_gem()
        except UsageError as exc:
            print(exc)
        import gem
        assert gem.__name__ == "gem" and gem is not compat  # still the reference
        """,
        hide=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "a real `gem` package is importable" in out.stdout and "register_gem_core_envs" in out.stdout
