#!/usr/bin/env python
"""Wall time of whole `simfront` processes against the `python -c 'import numpy'` floor, in the same run.

    python scripts/bench_speed.py [--repeat 5] [--cases floor,import,predict,plan,gb200] [--json out.json] [--no-bytecode]

Each case is a fresh subprocess (what a user waits for: interpreter start, imports, file parsing,
the search, printing), run ``--repeat`` times with the cases interleaved so that a load spike on a
shared machine hits all of them alike; the best of the repeats is kept (the least disturbed run).
Every ratio is best time / best floor time, both measured in this run on this machine.

Targets (issue 16): predict for deepseek-r1 on 16xH200 at ISL 8192 / OSL 1024 (>= 10^5
configurations) <= 2x the floor; plan over the six default GPU types <= 6x; a 576xGB200 search
<= 4x. The imports have no target: `import simfront.cli` is what --help, --version and shell
completion pay; `import simfront.api` (numpy, pydantic, the cost model) is what every computing command pays.
The typer case is a bare typer app with as many options as `simfront predict` (scripts/typer_floor.py, no numpy,
no simfront): the CLI framework's own share of every command.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable

# name -> (argv after the interpreter, target ratio to the floor or None, what it is)
CASES: dict[str, tuple[list[str], float | None, str]] = {
    "floor": (["-c", "import numpy"], None, "python -c 'import numpy' (the floor)"),
    "import": (["-c", "import simfront.cli"], None, "import simfront.cli"),
    "api": (["-c", "import simfront.api"], None, "import simfront.api (what predict imports)"),
    "help": (["-m", "simfront", "--help"], None, "simfront --help"),
    # typer alone: an app with as many options as `simfront predict`, parsing two of them (scripts/typer_floor.py);
    # the option count is filled in at run time (predict_option_count)
    "typer": (["scripts/typer_floor.py", "{predict_options}", "--opt0", "deepseek-r1", "--opt1", "16xH200"], None,
              "bare typer app, predict's option count"),
    "predict": (["-m", "simfront", "predict", "--model", "deepseek-r1", "--gpus", "16xH200", "--isl", "8192", "--osl", "1024"],
                2.0, "predict deepseek-r1 16xH200 8192/1024"),
    "plan": (["-m", "simfront", "plan", "--model", "deepseek-r1", "--rate", "20", "--isl", "8192", "--osl", "1024",
              "--ttft", "2000", "--tpot", "30", "--quiet"], 6.0, "plan deepseek-r1 20 req/s, six GPU types"),
    "gb200": (["-m", "simfront", "predict", "--model", "deepseek-r1", "--gpus", "576xGB200", "--isl", "8192", "--osl", "1024"],
              4.0, "predict deepseek-r1 576xGB200 8192/1024"),
}
DEFAULT_CASES = ("floor", "typer", "import", "api", "help", "predict", "plan", "gb200")


def predict_option_count() -> int:
    """Options of `simfront predict` as typer builds the command (the typer case's size)."""
    import typer.main

    sys.path.insert(0, str(ROOT))
    from simfront import cli

    return len(typer.main.get_command(cli.app).commands["predict"].params)


def child_env() -> dict:
    """The children's environment: this checkout first on the path, and byte-code caching ON.

    The warm-up run is there to leave byte-compiled modules behind, as a user's second run finds them;
    with PYTHONDONTWRITEBYTECODE set (some sandboxes set it) every run would compile simfront's sources
    again (about 0.3 s of CPU), so the children run without it unless ``--no-bytecode`` asks for that."""
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if not NO_BYTECODE:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


NO_BYTECODE = False  # --no-bytecode: keep PYTHONDONTWRITEBYTECODE as the caller has it


def time_once(argv: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one subprocess, start to exit; its output is discarded.

    CPU time (user + system, from the child's resource usage) is reported beside the wall time: on a
    shared machine it moves less with the load than the wall time does. A failure stops the benchmark."""
    env = child_env()
    with tempfile.TemporaryFile() as err:
        t = time.perf_counter()
        p = subprocess.Popen([PY, *argv], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(p.pid, 0)
        dt = time.perf_counter() - t
        p.returncode = os.waitstatus_to_exitcode(status)
        if p.returncode != 0:
            err.seek(0)
            sys.exit(f"error: {' '.join(argv)} exited {p.returncode}: {err.read().decode(errors='replace').strip()[-500:]}")
    return dt, usage.ru_utime + usage.ru_stime


def configurations(argv: list[str]) -> int | None:
    """How many configurations a predict case evaluates (from its --json), to check the >= 10^5 claim."""
    if "predict" not in argv:
        return None
    env = child_env()
    p = subprocess.run([PY, *argv, "--json"], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    return int(json.loads(p.stdout)["n_configs_evaluated"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5, help="runs of each case (best kept)")
    ap.add_argument("--cases", default=",".join(DEFAULT_CASES), help=f"comma list of {', '.join(CASES)}")
    ap.add_argument("--json", dest="json_out", default=None, help="also write the results here")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE from the environment (every run compiles the sources)")
    a = ap.parse_args(argv)
    global NO_BYTECODE
    NO_BYTECODE = a.no_bytecode
    names = [c.strip() for c in a.cases.split(",") if c.strip()]
    bad = [c for c in names if c not in CASES]
    if bad:
        ap.error(f"unknown case(s) {bad}; valid: {', '.join(CASES)}")
    if "floor" not in names:
        names.insert(0, "floor")
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    if "typer" in names:
        argv_t, target_t, what_t = CASES["typer"]
        n_opt = str(predict_option_count())
        CASES["typer"] = ([n_opt if w == "{predict_options}" else w for w in argv_t], target_t, f"{what_t} ({n_opt})")
    for n in names:  # one warm-up each: byte-compiled files and the page cache, as for a user's second run
        time_once(CASES[n][0])
    runs: dict[str, list[float]] = {n: [] for n in names}
    cpu: dict[str, list[float]] = {n: [] for n in names}
    for _ in range(a.repeat):  # interleaved: a load spike lands on every case alike
        for n in names:
            wall, used = time_once(CASES[n][0])
            runs[n].append(wall)
            cpu[n].append(used)
    floor, floor_cpu = min(runs["floor"]), min(cpu["floor"])
    rows, ok = [], True
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; best of {a.repeat} (median in brackets); "
          f"ratio = best / best floor, wall time (CPU time in brackets)")
    for n in names:
        argv_n, target, what = CASES[n]
        best, med = min(runs[n]), sorted(runs[n])[len(runs[n]) // 2]
        ratio, cpu_ratio = best / floor, min(cpu[n]) / floor_cpu
        met = None if target is None else ratio <= target
        ok &= met is not False
        cfg = configurations(argv_n)
        rows.append({"case": n, "what": what, "best_s": round(best, 4), "median_s": round(med, 4), "ratio": round(ratio, 2),
                     "best_cpu_s": round(min(cpu[n]), 4), "cpu_ratio": round(cpu_ratio, 2),
                     "target_ratio": target, "met": met, "configurations": cfg})
        tgt = "" if target is None else f"  target <= {target:g}x: {'met' if met else 'MISSED'}"
        extra = f"  ({cfg:,} configurations)" if cfg else ""
        print(f"  {what:44s} {best:6.3f} s [{med:6.3f}]  {ratio:5.2f}x [{cpu_ratio:5.2f}x]{tgt}{extra}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"python": sys.version.split()[0], "cpus": os.cpu_count(), "repeat": a.repeat,
                                                "floor_s": floor, "floor_cpu_s": floor_cpu, "cases": rows}, indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
