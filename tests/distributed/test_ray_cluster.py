"""`gem_core.testing.ray_cluster.loopback_cluster` keeps Ray off the host's temp dir."""

from __future__ import annotations

import os

import pytest


def test_a_machine_that_never_ran_ray(tmp_path_factory, monkeypatch):
    """No ``<default temp>/ray`` directory (a fresh machine): the cluster starts, writes its
    address file in its own temp dir, leaves the default one untouched and restores RAY_TMPDIR."""
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'gem-core[ray]'")
    from gem_core.testing.ray_cluster import loopback_cluster

    host = tmp_path_factory.mktemp("host")  # stands for the host's /tmp: it has no ray/ directory
    monkeypatch.setenv("RAY_TMPDIR", str(host))
    own = tmp_path_factory.mktemp("own")  # short: Ray's socket paths must fit in 107 bytes
    with loopback_cluster(own, num_nodes=1, node_args={"num_cpus": 1, "object_store_memory": 80 << 20}) as cluster:
        import ray

        assert os.environ["RAY_TMPDIR"] == str(own)
        address = (own / "ray" / "ray_current_cluster").read_text()
        assert address == cluster.address and address.startswith("127.0.0.1:")
        assert ray.get(ray.remote(lambda: os.environ["RAY_TMPDIR"]).remote()) == str(own)
    assert os.environ["RAY_TMPDIR"] == str(host)
    assert list(host.iterdir()) == []  # nothing written where the host's leftovers would be


def test_ray_imported_without_the_loopback_setting_is_refused(tmp_path):
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'gem-core[ray]'")
    import subprocess
    import sys

    code = (
        "import os; os.environ.pop('RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER', None)\n"
        "import ray\n"
        "from gem_core.testing.ray_cluster import loopback_cluster\n"
        f"try:\n    loopback_cluster({str(tmp_path)!r}).__enter__()\n"
        "except RuntimeError as e:\n    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0" in out.stdout and "127.0.0.1" in out.stdout, out.stderr
    assert not (tmp_path / "ray").exists()  # refused before anything was started or written
