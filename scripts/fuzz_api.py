"""Random calls of the public API over the whole catalog: exceptions, non-finite numbers and slow calls.

Each call draws a model, a GPU type and count and a few options (lengths, engine, precision, speculation, mode,
two-batch overlap, workload, routing skew, SLAs, ``--tails``) and runs ``api.predict`` (or, with ``--kinds``,
``explain``, ``memory``, ``plan``, ``compare`` or a ``--launch`` line). A one-line input error (``SimfrontError``)
is the expected answer to a combination that makes no sense and is counted, not reported; anything else that is
raised, any NaN or infinite number in a result, and any call slower than ``--slow`` seconds is reported with the
call that produced it, so it can be replayed. Calls are drawn from ``--seed``, so a run is repeatable.

    python scripts/fuzz_api.py [--seed 1] [--calls 500 | --seconds 300] [--kinds predict,explain,memory,plan,compare,launch]
                               [--tails 0.1] [--slow 10]

Exits 1 when something was reported. Round 42 of docs/model_changes.md has what it found first (three ways the
step-level simulation behind ``--tails`` hung or crawled).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import api  # noqa: E402
from simfront.errors import SimfrontError  # noqa: E402

KINDS = ("predict", "explain", "memory", "plan", "compare", "launch")
COUNTS = (1, 2, 4, 8, 16, 24, 32, 64, 72)
ENGINES = ("vllm", "sglang", "trtllm")


def _maybe(rng, p, value):
    return value if rng.random() < p else None


def draw(rng: random.Random, kind: str, models: list[str], gpus: list[str], tails: float) -> dict:
    """Keyword arguments of one call of ``kind`` (options left out take the API's defaults)."""
    m, g, n = rng.choice(models), rng.choice(gpus), rng.choice(COUNTS)
    if kind in ("predict", "launch"):
        kw = {"model": m, "gpus": f"{n}x{g}", "isl": _maybe(rng, 0.5, rng.choice([128, 1024, 4096, 8192, 32768])),
              "osl": _maybe(rng, 0.5, rng.choice([2, 16, 256, 1024, 8192])), "engine": _maybe(rng, 0.3, rng.choice(ENGINES))}
        if kind == "predict":
            kw.update(spec=_maybe(rng, 0.2, rng.choice(["mtp", "eagle", "ngram"])),
                      precision=_maybe(rng, 0.2, rng.choice(["bf16", "fp8", "fp8_block", "nvfp4", "mxfp4", "w4a16", "int8"])),
                      kv_dtype=_maybe(rng, 0.2, rng.choice(["fp8", "bf16"])),
                      modes=_maybe(rng, 0.3, [rng.choice(["agg", "disagg"])]),
                      prefix_hit=_maybe(rng, 0.15, rng.choice([0.0, 0.5, 0.99])),
                      routing_skew=_maybe(rng, 0.1, rng.choice(["balanced", 1.2])),
                      max_pp=_maybe(rng, 0.1, rng.choice([1, 2, 4])),
                      tails=rng.random() < tails, two_batch_overlap=rng.random() < 0.15)
            if rng.random() < 0.15:
                kw.update(ttft_ms=rng.choice([50, 500, 5000]), tpot_ms=rng.choice([5, 20, 100]))
            if rng.random() < 0.1:
                kw.update(workload="agentic-coding", isl=None)
        return {k: v for k, v in kw.items() if v is not None}
    if kind == "explain":
        tp, dp, pp = rng.choice([1, 2, 4, 8]), rng.choice([1, 1, 2, 4, 8]), rng.choice([1, 1, 2])
        kw = {"model": m, "gpus": f"{tp * dp * pp}x{g}", "tp": tp, "attention_dp": dp, "pp": pp,
              "ep": rng.choice([1, 1, 2, 4, 8, 16]), "batch": rng.choice([1, 3, 16, 100, 1000]),
              "phase": rng.choice(["decode", "prefill"]), "mode": rng.choice(["agg", "disagg"]),
              "engine": _maybe(rng, 0.3, rng.choice(ENGINES)), "spec": _maybe(rng, 0.3, rng.choice(["mtp", "eagle", "ngram"])),
              "precision": _maybe(rng, 0.3, rng.choice(["bf16", "fp8", "fp8_block", "nvfp4", "mxfp4"])),
              "two_batch_overlap": rng.random() < 0.2}
        if rng.random() < 0.5:  # a bare step at a context, or the step of a serving point at its lengths
            kw["ctx"] = rng.choice([1, 100, 4096, 100000])
        else:
            kw.update(isl=rng.choice([128, 1024, 8192]), osl=rng.choice([16, 1024]))
        return {k: v for k, v in kw.items() if v is not None}
    if kind == "memory":
        return {"model": m, "gpus": f"{n}x{g}", "precision": rng.choice(["native", "fp8", "nvfp4", "bf16"]),
                "kv_dtype": rng.choice(["native", "fp8"]), "isl": rng.choice([128, 8192, 131072]), "osl": rng.choice([2, 1024])}
    if kind == "plan":
        kw = {"model": m, "rate": rng.choice([0.5, 5.0, 50.0]), "isl": rng.choice([1024, 8192]), "osl": rng.choice([256, 1024]),
              "hardware": rng.sample(gpus, 2)}
        if rng.random() < 0.5:
            kw.update(ttft_ms=1000.0, tpot_ms=30.0)
        return kw
    return {"model": m, "gpu_sets": [f"{n}x{g}", f"{rng.choice(COUNTS)}x{rng.choice(gpus)}"]}  # compare


def run(kind: str, kw: dict, rng: random.Random):
    """One call; returns what it produced (for the non-finite check)."""
    if kind == "predict":
        return api.predict(**kw).model_dump()
    if kind == "explain":
        return api.explain(**kw).model_dump()
    if kind == "memory":
        return api.memory(**kw).model_dump()
    if kind == "plan":
        return api.plan(**kw).model_dump()
    if kind == "compare":
        return api.compare_gpus(**kw)
    res = api.predict(**kw)  # launch: the engine's lines for a few frontier points
    engine = kw.get("engine") or rng.choice(ENGINES)
    return [api.launch_for(p.model_dump(), kw["model"], kw["gpus"], engine, kw.get("isl", 1024), kw.get("osl", 1024),
                           priced_engine=kw.get("engine")) for p in res.frontier[:3]]


def non_finite(obj, path: str = "") -> list[str]:
    """Paths of NaN or infinite floats in a nested result."""
    if isinstance(obj, float):
        return [path] if not math.isfinite(obj) else []
    if isinstance(obj, dict):
        return [p for k, v in obj.items() for p in non_finite(v, f"{path}.{k}")]
    if isinstance(obj, (list, tuple)):
        return [p for i, v in enumerate(obj) for p in non_finite(v, f"{path}[{i}]")]
    return []


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=1, help="seed of the drawn calls (a run is repeatable)")
    ap.add_argument("--calls", type=int, default=None, help="stop after this many calls")
    ap.add_argument("--seconds", type=float, default=300.0, help="stop after this long (without --calls)")
    ap.add_argument("--kinds", default="predict", help=f"comma list of {', '.join(KINDS)}")
    ap.add_argument("--tails", type=float, default=0.1, help="share of predict calls with --tails")
    ap.add_argument("--slow", type=float, default=10.0, help="report calls slower than this (seconds)")
    a = ap.parse_args(argv)
    kinds = [k.strip() for k in a.kinds.split(",") if k.strip()]
    if not kinds or set(kinds) - set(KINDS):
        ap.error(f"--kinds {a.kinds!r}: valid kinds are {', '.join(KINDS)}")
    rng = random.Random(a.seed)
    models = [m["name"] for m in api.list_models()]
    gpus = [h["id"] for h in api.list_hardware()]
    deadline = time.perf_counter() + a.seconds
    calls = refused = 0
    reports = []
    while (calls < a.calls) if a.calls is not None else (time.perf_counter() < deadline):
        kind = rng.choice(kinds)
        kw = draw(rng, kind, models, gpus, a.tails)
        calls += 1
        t = time.perf_counter()
        try:
            out = run(kind, kw, rng)
        except SimfrontError:
            refused += 1
            continue
        except Exception as e:  # noqa: BLE001 - anything but a one-line input error is a finding
            reports.append((kind, kw, f"{type(e).__name__}: {e}", traceback.format_exc(limit=-3)))
            continue
        dt = time.perf_counter() - t
        if bad := non_finite(out):
            reports.append((kind, kw, f"non-finite {', '.join(bad[:5])}", ""))
        if dt > a.slow:
            reports.append((kind, kw, f"slow: {dt:.1f} s", ""))
    print(f"{calls} calls ({', '.join(kinds)}; seed {a.seed}): {refused} refused with a one-line input error, "
          f"{len(reports)} reported")
    for kind, kw, what, tb in reports:
        print(f"- {kind}({kw}): {what}")
        if tb:
            print("  " + tb.strip().replace("\n", "\n  "))
    return 1 if reports else 0


if __name__ == "__main__":
    sys.exit(main())
