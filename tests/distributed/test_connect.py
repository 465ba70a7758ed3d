"""Bad input around Ray: not installed, an unreachable address, another cluster connected;
and `import gem_core` never importing Ray."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time

import pytest

from gem_core.errors import install_command
from tests.distributed.conftest import REPO

pytestmark = pytest.mark.timeout(120)


def _run(script: str, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def test_without_ray_every_entry_point_names_the_extra():
    script = (
        "import sys\n"
        "sys.modules['ray'] = None  # as if Ray were not installed\n"
        "import gem_core, gem_core.distributed\n"
        "from gem_core.errors import DependencyNotInstalled\n"
        "from gem_core.distributed import RayEnvPool, RayVectorEnv\n"
        "from tests.vector.conftest import generic\n"
        "calls = [lambda: RayEnvPool(), lambda: RayVectorEnv([generic()]),\n"
        "         lambda: gem_core.make_vec('toy:Echo-v0', 2, vectorization_mode='ray')]\n"
        "for call in calls:\n"
        "    try:\n"
        "        call()\n"
        "    except DependencyNotInstalled as e:\n"
        "        print(e)\n"
    )
    done = _run(script)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 3, done.stdout
    for line in lines:
        assert line == ("'ray' is not installed for running envs on Ray actors (gem_core.distributed). "
                        f"Install it with: {install_command('ray')}")


def test_import_gem_core_does_not_import_ray():
    script = (
        "import sys, gem_core, gem_core.distributed, gem_core.rl.collect\n"
        "gem_core.make_vec('toy:Echo-v0', 2).close()\n"
        "print('ray' in sys.modules)\n"
    )
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_unreachable_addresses_fail_fast_and_clearly():
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'gem-core[ray]'")
    script = (
        "import os, socket, time\n"
        "os.environ['RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER'] = '0'\n"
        "from gem_core.distributed import RayConnectionError, RayEnvPool\n"
        "closed = socket.socket(); closed.bind(('127.0.0.1', 0)); port = closed.getsockname()[1]; closed.close()\n"
        "silent = socket.socket(); silent.bind(('127.0.0.1', 0)); silent.listen(8)\n"
        "for address, timeout in [(f'127.0.0.1:{port}', 30), (f'127.0.0.1:{silent.getsockname()[1]}', 2)]:\n"
        "    start = time.monotonic()\n"
        "    try:\n"
        "        RayEnvPool(address=address, connect_timeout=timeout)\n"
        "    except RayConnectionError as e:\n"
        "        print(round(time.monotonic() - start, 1), '|', str(e).splitlines()[0])\n"
        "os._exit(0)  # the abandoned ray.init thread would retry for minutes\n"
    )
    start = time.monotonic()
    done = _run(script)
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - start < 40
    refused, silent = done.stdout.strip().splitlines()
    # Quiet: 0.4-0.5 s (Ray's import included); waiting out the 30 s connect_timeout is the bug.
    assert float(refused.split(" | ")[0]) < 10
    assert "no Ray cluster answers at 127.0.0.1:" in refused and "ray start --head" in refused
    assert float(silent.split(" | ")[0]) < 6
    assert "did not answer within 2 s (the port is open, but no Ray GCS replied)" in silent


def test_malformed_address():
    from gem_core.distributed import connect
    from gem_core.errors import InvalidArgument

    pytest.importorskip("ray", reason="Ray is not installed")
    with pytest.raises(InvalidArgument, match=r"a Ray address must be 'host:port'.*got 'headnode'"):
        connect("headnode")


def test_another_cluster_while_connected(ray_cluster):
    from gem_core.distributed import RayEnvPool
    from gem_core.errors import InvalidArgument

    with pytest.raises(InvalidArgument, match=r"already connected to the Ray cluster at 127.0.0.1:\d+, not '127.0.0.1:1'"):
        RayEnvPool(address="127.0.0.1:1")
    pool = RayEnvPool(address=ray_cluster.address)  # the connected one: fine
    pool.close()


_LISTENERS = (
    "def listeners():\n"
    "    found = set()\n"
    "    for name in ('/proc/net/tcp', '/proc/net/tcp6'):\n"
    "        with open(name) as f:\n"
    "            for line in f.readlines()[1:]:\n"
    "                local, state = line.split()[1], line.split()[3]\n"
    "                if state == '0A':\n"
    "                    found.add(local)\n"
    "    return found\n"
)


def test_a_local_cluster_started_by_connect_listens_on_loopback_only():
    """Regression (hostile output, part 2): `connect()` started a local cluster listening on
    every interface (and advertising the machine's address)."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'gem-core[ray]'")
    script = _LISTENERS + (
        "import time\n"
        "before = listeners()\n"
        "from gem_core.distributed._ray import connect\n"
        "ray = connect(num_cpus=1, include_dashboard=False)\n"
        "time.sleep(1)\n"
        "new = sorted(listeners() - before)\n"
        "print(ray.get_runtime_context().gcs_address, new)\n"
        "ray.shutdown()\n"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "RAY_ADDRESS")}
    short = tempfile.mkdtemp(prefix="gr")  # Ray's socket paths are limited to 107 bytes
    env["RAY_TMPDIR"] = short  # its own temp dir: no other test's cluster is found and joined
    try:
        done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                              cwd=REPO, env=env)
    finally:
        shutil.rmtree(short, ignore_errors=True)
    assert done.returncode == 0, done.stderr[-3000:]
    gcs, new = done.stdout.strip().splitlines()[-1].split(" ", 1)
    assert gcs.startswith("127.0.0.1:"), done.stdout
    addresses = eval(new)  # noqa: S307 - our own print of a list of strings
    assert addresses, "no listener found"
    loopback = ("0100007F:", "0000000000000000FFFF00000100007F:", "00000000000000000000000001000000:")
    assert all(a.startswith(loopback) for a in addresses), addresses
