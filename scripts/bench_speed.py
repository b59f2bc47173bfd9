#!/usr/bin/env python
"""Wall time of whole `simfront` processes against the `python -c 'import numpy'` floor, in the same run.

    python scripts/bench_speed.py [--repeat 5] [--cases floor,import,predict,plan,gb200] [--json out.json]

Each case is a fresh subprocess (what a user waits for: interpreter start, imports, file parsing,
the search, printing), run ``--repeat`` times with the cases interleaved so that a load spike on a
shared machine hits all of them alike; the best of the repeats is kept (the least disturbed run).
Every ratio is best time / best floor time, both measured in this run on this machine.

Targets (issue 16): predict for deepseek-r1 on 16xH200 at ISL 8192 / OSL 1024 (>= 10^5
configurations) <= 2x the floor; plan over the six default GPU types <= 6x; a 576xGB200 search
<= 4x. The CLI import has no target; it is reported because every command pays it.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

# name -> (argv after the interpreter, target ratio to the floor or None, what it is)
CASES: dict[str, tuple[list[str], float | None, str]] = {
    "floor": (["-c", "import numpy"], None, "python -c 'import numpy' (the floor)"),
    "import": (["-c", "import simfront.cli"], None, "import simfront.cli"),
    "help": (["-m", "simfront", "--help"], None, "simfront --help"),
    "predict": (["-m", "simfront", "predict", "--model", "deepseek-r1", "--gpus", "16xH200", "--isl", "8192", "--osl", "1024"],
                2.0, "predict deepseek-r1 16xH200 8192/1024"),
    "plan": (["-m", "simfront", "plan", "--model", "deepseek-r1", "--rate", "20", "--isl", "8192", "--osl", "1024",
              "--ttft", "2000", "--tpot", "30", "--quiet"], 6.0, "plan deepseek-r1 20 req/s, six GPU types"),
    "gb200": (["-m", "simfront", "predict", "--model", "deepseek-r1", "--gpus", "576xGB200", "--isl", "8192", "--osl", "1024"],
              4.0, "predict deepseek-r1 576xGB200 8192/1024"),
}
DEFAULT_CASES = ("floor", "import", "help", "predict", "plan", "gb200")


def time_once(argv: list[str]) -> float:
    """Seconds of one subprocess, start to exit; its output is discarded (a failure stops the benchmark)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t = time.perf_counter()
    p = subprocess.run([PY, *argv], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    dt = time.perf_counter() - t
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(argv)} exited {p.returncode}: {p.stderr.strip()[-500:]}")
    return dt


def configurations(argv: list[str]) -> int | None:
    """How many configurations a predict case evaluates (from its --json), to check the >= 10^5 claim."""
    if "predict" not in argv:
        return None
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([PY, *argv, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return int(json.loads(p.stdout)["n_configs_evaluated"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each case (best kept)")
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES), help=f"comma list of {', '.join(CASES)}")
    ap.add_argument("--json", dest="json_out", default=None, help="also write the results here")
    a = ap.parse_args(argv)
    names = [c.strip() for c in a.cases.split(",") if c.strip()]
    bad = [c for c in names if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {bad}; valid: {', '.join(CASES)}")
    if "floor" not in names:
        names.insert(0, "floor")
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    for n in names:  # one warm-up each: byte-compiled files and the page cache, as for a user's second run
        time_once(CASES[n][0])
    runs: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(a.repeat):  # interleaved: a load spike lands on every case alike
        for n in names:
            runs[n].append(time_once(CASES[n][0]))
    floor = min(runs["floor"])
    rows, ok = [], True
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; best of {a.repeat} (median in brackets); ratio = best / best floor")
    for n in names:
        argv_n, target, what = CASES[n]
        best, med = min(runs[n]), sorted(runs[n])[len(runs[n]) // 2]
        ratio = best / floor
        met = None if target is None else ratio <= target
        ok &= met is not False
        cfg = configurations(argv_n)
        rows.append({"case": n, "what": what, "best_s": round(best, 4), "median_s": round(med, 4), "ratio": round(ratio, 2),
                     "target_ratio": target, "met": met, "configurations": cfg})
        tgt = "" if target is None else f"  target <= {target:g}x: {'met' if met else 'MISSED'}"
        extra = f"  ({cfg:,} configurations)" if cfg else ""
        print(f"  {what:48s} {best:6.3f} s [{med:6.3f}]  {ratio:5.2f}x{tgt}{extra}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count(), "repeat": a.repeat,
                                                "floor_s": floor, "cases": rows}, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
