"""Does a user's install line resolve? pip's own resolver, in a throwaway venv, on the index.

Each adapter's tests check the line its README gives (``pip install gem-core gem-<trainer>
<trainer>==<tested version>``) with `resolve_install`: an empty venv of the trainer's
supported Python (no packages, no pip: what a user's fresh venv holds), then ``pip
--python <that venv> install --dry-run --report``, run by the calling interpreter's pip, on
the package index pip is configured with. Nothing is installed; pip downloads metadata (and
builds the metadata of sdists, as a real install would). The packages of this repository
are named by their folder, so the check covers the versions in the checkout.

``assume_installed`` names packages that only build on a GPU machine (flash-attn compiles
CUDA code in its metadata step): each is written into the venv as installed metadata
(``.dist-info``, no requirements) at the given version, so pip takes it as present, as it
is on a CUDA node, and resolves everything else. `InstallResolution.assumed` lists them.

The index unreachable raises `IndexUnreachable` (tests skip with the reason); a line that
does not resolve raises `ResolutionImpossible` with pip's own explanation.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import venv
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gem_core.errors import IndexUnreachable, ResolutionImpossible

__all__ = [
    "InstallResolution",
    "IndexUnreachable",
    "ResolutionImpossible",
    "resolve_install",
    "find_python",
    "canonical_name",
    "pinned_version",
    "check_install_line",
]

_UNREACHABLE = (
    "NewConnectionError",
    "Network is unreachable",
    "Max retries",
    "Temporary failure in name resolution",
    "No matching distribution found for setuptools",
)


@dataclass(frozen=True)
class InstallResolution:
    """What ``pip install`` would install: canonical name -> version."""

    versions: dict[str, str]
    python: str
    """The Python version it was resolved for (``3.11.7``)."""
    assumed: dict[str, str] = field(default_factory=dict)
    """Packages taken as already installed (``assume_installed``)."""

    def __contains__(self, name: str) -> bool:
        return canonical_name(name) in self.versions

    def version(self, name: str) -> str:
        """The version pip picked for ``name`` (KeyError names what it did pick)."""
        try:
            return self.versions[canonical_name(name)]
        except KeyError:
            raise KeyError(f"{name} is not in the resolution ({len(self.versions)} packages: {sorted(self.versions)})") from None


def canonical_name(name: str) -> str:
    """PEP 503's normalised project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


def find_python(version: str) -> str | None:
    """An interpreter of ``version`` (``"3.10"``) on this machine: ``pythonX.Y`` on PATH, or
    pyenv's; None where there is none."""
    candidates = [shutil.which(f"python{version}")]
    pyenv_root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates += sorted(str(p) for p in pyenv_root.glob(f"versions/{version}.*/bin/python{version}"))
    for c in candidates:
        if not c:
            continue
        try:
            out = subprocess.run([c, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                                 capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            continue
        if out.returncode == 0 and out.stdout.strip() == version:
            return c
    return None


def resolve_install(
    requirements: Sequence[str | os.PathLike[str]],
    *,
    workdir: str | os.PathLike[str],
    python: str | None = None,
    assume_installed: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 1200,
) -> InstallResolution:
    """Resolve ``pip install *requirements`` for a fresh venv of ``python``.

    Args:
        requirements: what the user's line names: requirement strings and folders of local
            projects (``Path`` or a string naming an existing folder; with ``[extras]`` after
            a folder string).
        workdir: an empty folder for the venv and pip's report.
        python: the interpreter the user's venv would have (default this one).
        assume_installed: ``{name: version}`` taken as installed (module docs).
        cwd: the folder pip runs in (relative paths in a requirements file are relative to it).
        timeout: seconds for pip.
    """
    workdir = Path(workdir)
    target = workdir / "venv"
    if python is None or Path(python).resolve() == Path(sys.executable).resolve():
        venv.EnvBuilder(with_pip=False).create(target)
    else:
        subprocess.run([python, "-m", "venv", "--without-pip", str(target)], check=True,
                       capture_output=True, text=True, timeout=120)
    target_python = target / "bin" / "python"
    probe = subprocess.run(
        [str(target_python), "-c",
         "import platform, sysconfig; print(platform.python_version()); print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True, timeout=60,
    )
    py_version, site = probe.stdout.split()
    assumed = dict(assume_installed or {})
    for name, version in assumed.items():
        info = Path(site) / f"{canonical_name(name).replace('-', '_')}-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
        (info / "INSTALLER").write_text("gem-core-tests (assumed installed)\n")
        (info / "RECORD").write_text("")
    report = workdir / "report.json"
    args = [str(r) for r in requirements]
    cmd = [sys.executable, "-m", "pip", "--python", str(target_python), "install", "--dry-run",
           "--quiet", "--report", str(report), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd)
    except subprocess.TimeoutExpired as e:
        raise ResolutionImpossible(f"pip did not finish resolving {args} in {timeout:.0f} s") from e
    if proc.returncode != 0:
        err = "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("WARNING: Location"))
        if any(s in err for s in _UNREACHABLE):
            raise IndexUnreachable(f"the package index cannot be reached: {err.strip().splitlines()[-1]}")
        raise ResolutionImpossible(f"pip cannot resolve `pip install {' '.join(args)}` on Python {py_version}:\n{err[-4000:]}")
    installs = json.loads(report.read_text())["install"]
    versions = {canonical_name(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}
    return InstallResolution(versions=versions, python=py_version, assumed=assumed)


def pinned_version(requirements_file: str | os.PathLike[str], name: str) -> str:
    """The ``name==X`` pin of a requirements file (a test venv's), so the install check
    follows the version the tests run."""
    want = canonical_name(name)
    for line in Path(requirements_file).read_text().splitlines():
        m = re.match(r"\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^]]*\])?\s*==\s*([^\s;#]+)", line)
        if m and canonical_name(m.group(1)) == want:
            return m.group(3)
    raise LookupError(f"{requirements_file} pins no {name}==...")


def check_install_line(
    requirements: Sequence[str | os.PathLike[str]],
    *,
    workdir: str | os.PathLike[str],
    expect: Mapping[str, str | None],
    **kwargs,
) -> InstallResolution:
    """`resolve_install`, as a test: skips (pytest) where the index cannot be reached, fails
    with pip's explanation where the line does not resolve, and checks that every name in
    ``expect`` is installed (at the given version; None: any)."""
    import pytest

    try:
        res = resolve_install(requirements, workdir=workdir, **kwargs)
    except IndexUnreachable as e:
        pytest.skip(str(e))
    except ResolutionImpossible as e:
        pytest.fail(str(e), pytrace=False)
    for name, version in expect.items():
        got = res.version(name)
        assert version is None or got == version, f"pip resolves {name} {got}, expected {version}"
    return res
