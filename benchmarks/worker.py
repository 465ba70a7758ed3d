"""Run one benchmark module against one backend in this interpreter and write its result as JSON."""

# Invoked by ``run.py`` as a subprocess, with the Python of the backend's own virtual
# environment, so gem_core and the reference GEM are never imported together:
#
#     python benchmarks/worker.py --backend ours --bench vector --config '{...}' --out result.json
#
# With ``--interleaved`` it runs the module's ``measure_interleaved(backend, config, baton)``
# instead, taking turns with the other backend's worker (`baton.Baton`, pipes from run.py).

from __future__ import annotations

import argparse
import importlib
import json
import platform
import sys
import time
import traceback


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--backend", required=True, choices=["ours", "reference"])
    parser.add_argument("--bench", required=True, help="benchmark module name (bench_<NAME>.py)")
    parser.add_argument("--config", required=True, help="the benchmark's config as a JSON object")
    parser.add_argument("--out", required=True, help="where to write the JSON result")
    parser.add_argument("--interleaved", action="store_true",
                        help="run measure_interleaved, taking turns with the peer named by $GEM_BENCH_BATON")
    args = parser.parse_args(argv)

    from backends import get_backend

    out: dict = {"backend": args.backend, "python": platform.python_version()}
    start = time.perf_counter()
    try:
        backend = get_backend(args.backend)
        module = importlib.import_module(f"bench_{args.bench}")
        if args.interleaved:
            from baton import Baton

            baton = Baton.from_env()
            try:
                out["result"] = module.measure_interleaved(backend, json.loads(args.config), baton)
            finally:
                baton.close()  # the peer goes on alone rather than wait for this worker
            out["baton"] = baton.report()
        else:
            out["result"] = module.measure(backend, json.loads(args.config))
        out["version"] = backend.version()
        status = 0
    except Exception as e:
        out["error"] = f"{type(e).__name__}: {e}"
        out["traceback"] = traceback.format_exc()
        status = 1
    out["wall_s"] = time.perf_counter() - start
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1, default=str)
    return status


if __name__ == "__main__":
    sys.exit(main())
