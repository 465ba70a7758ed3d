"""Install the reference GEM (PyPI ``gem-llm``) into its own cached virtual environment, idempotently."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import venv
from pathlib import Path

__all__ = ["REFERENCE_REQUIREMENT", "UNDECLARED_DEPENDENCIES", "default_venv_dir", "ensure_reference_python"]

REFERENCE_REQUIREMENT = "gem-llm==0.1.0"
# Imported by the reference's own envs but missing from its declared dependencies
# (gem-llm 0.1.0: the Crosswords env imports pandas; the math, code and QA envs import
# datasets; its math grader imports pylatexenc).
UNDECLARED_DEPENDENCIES = ("pandas", "datasets", "pylatexenc")
INSTALL_TIMEOUT_S = 1200


def default_venv_dir() -> Path:
    """``$GEM_CACHE/venv-ref-gem`` (``GEM_CACHE`` defaults to ``~/.cache/gem``, as in the Makefile)."""
    cache = os.environ.get("GEM_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "gem")
    return Path(cache) / "venv-ref-gem"


def _python(venv_dir: Path) -> Path:
    return venv_dir / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def ensure_reference_python(venv_dir: Path, log=print) -> tuple[Path | None, str]:
    """Return ``(python, "")`` of a venv holding the reference, or ``(None, why not)``.

    A stamp file named after the requirement marks a finished install, so a second
    call does nothing. Installation needs PyPI; when it fails the reason is returned.
    """
    requirements = [REFERENCE_REQUIREMENT, *UNDECLARED_DEPENDENCIES]
    key = hashlib.sha1(" ".join(requirements).encode()).hexdigest()[:12]
    stamp = venv_dir / f".installed-{key}"
    python = _python(venv_dir)
    if stamp.exists() and python.exists():
        return python, ""
    log(f"installing the reference ({REFERENCE_REQUIREMENT}) into {venv_dir} (once) ...")
    try:
        if not python.exists():
            venv.EnvBuilder(with_pip=True, clear=True).create(venv_dir)
        cmd = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
               *requirements]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=INSTALL_TIMEOUT_S)
        if proc.returncode != 0:
            tail = " ".join((proc.stderr or proc.stdout).strip().splitlines()[-2:])
            return None, f"pip install {' '.join(requirements)} failed (exit {proc.returncode}): {tail}"
        check = subprocess.run([str(python), "-c", "import gem"], capture_output=True, text=True,
                               timeout=300)
        if check.returncode != 0:
            tail = " ".join(check.stderr.strip().splitlines()[-2:])
            return None, f"the reference installed but `import gem` fails: {tail}"
    except subprocess.TimeoutExpired as e:
        return None, f"installing the reference timed out after {e.timeout:.0f} s"
    except OSError as e:
        return None, f"could not create the reference venv at {venv_dir}: {e}"
    for old in venv_dir.glob(".installed-*"):
        old.unlink()
    stamp.touch()
    return python, ""


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else default_venv_dir()
    py, why = ensure_reference_python(target)
    print(py or why)
    sys.exit(0 if py else 1)
