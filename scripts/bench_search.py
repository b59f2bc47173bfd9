"""Benchmark the configuration search (checks the speed targets; not a timed unit test).

    python scripts/bench_search.py            # in-process search + whole `simfront predict` process

Targets (issue 4): the default search for deepseek-r1 on 16xH200 evaluates >= 100,000 configurations
in under 1 s in-process, and the whole `simfront predict` process takes under 2 s.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> int:
    from simfront import api

    api.predict("deepseek-r1", "16xH200")  # warm caches (config parsing, efficiency files)
    times = []
    for _ in range(5):
        t = time.perf_counter()
        res = api.predict("deepseek-r1", "16xH200")
        times.append(time.perf_counter() - t)
    print(f"in-process search: deepseek-r1 on 16xH200: {res['n_configs_evaluated']:,} configurations evaluated, "
          f"{res['n_feasible']:,} feasible, {len(res['frontier'])} on the frontier; best of 5: {min(times):.3f} s, median {sorted(times)[2]:.3f} s")
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "simfront.cli", "predict", "--model", "deepseek-r1", "--gpus", "16xH200"],
                       capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t
    print(f"whole process `simfront predict --model deepseek-r1 --gpus 16xH200`: {wall:.2f} s (exit {p.returncode})")
    ok = res["n_configs_evaluated"] >= 100_000 and min(times) < 1.0 and wall < 2.0
    print("targets met" if ok else "targets NOT met")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
