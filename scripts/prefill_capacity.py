#!/usr/bin/env python
"""A disaggregated prefill worker's throughput, measured against priced, by engine, precision and prefill layout.

InferenceMAX's disaggregated results state the input tokens per second each prefill GPU delivered
(``stated_input_tput_per_prefill_gpu`` in the notes of ``measurements/inferencemax_b200_h100.csv``). At loads where
the prefill side is the bottleneck (TTFT far above one prompt's prefill) that is the worker's capacity; elsewhere it is
what the decode side let through, so the table takes each deployment's highest stated value over its loads (a lower
bound of the capacity) and shows the TTFT of that run. Priced beside it: what the evaluator's busy prefill worker of the
same layout, batch and token budget completes (``measured.disagg_prefill_raw`` under the engine's shipped profile,
as `validate` prices the row: ``requests_s_worker`` x the mean prompt, ``prefill_scale`` included), per prefill GPU.
Nothing is fitted.

    python scripts/prefill_capacity.py [FILE] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront.ingest import load_measurements  # noqa: E402
from simfront.measured import disagg_prefill_raw, disagg_rows, disagg_workload, resolve  # noqa: E402
from simfront.serving import engine_profile, finish_prefill  # noqa: E402

DEFAULT_FILE = ROOT / "measurements" / "inferencemax_b200_h100.csv"
STATED = re.compile(r"stated_input_tput_per_prefill_gpu=([\d.]+)")


def stated_input_per_prefill_gpu(p) -> float | None:
    """The run's own input tokens/s per prefill GPU, from its notes (None where it states none)."""
    for key, val in (p.notes or {}).items():
        m = STATED.search(f"{key}={val}")
        if m:
            return float(m.group(1))
    return None


def priced_input_per_prefill_gpu(p) -> float | None:
    """Input tokens/s one busy prefill worker of the run's layout completes, per GPU, under the engine's profile."""
    r, _ = resolve(p)
    if r is None:
        return None
    d = disagg_rows([p], [0], r)
    # the profile the evaluator prices the row with (measured.evaluate): the engine's, with its release's constants
    res = finish_prefill(*disagg_prefill_raw(d, r), {**engine_profile(r.engine), **dict(r.constants)})
    return float(np.ravel(res.requests_s_worker)[0] * disagg_workload(r).mean_isl / np.ravel(d.prefill.gpus)[0])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    ap.add_argument("--json", dest="json_out", default=None)
    a = ap.parse_args(argv)
    ing = load_measurements([a.file])
    best: dict[tuple, tuple] = {}
    for p in ing.points:
        if p.mode != "disagg":
            continue
        stated = stated_input_per_prefill_gpu(p)
        if stated is None:
            continue
        key = (str(p.gpu), str(p.engine), str(p.precision), int(p.isl), int(p.prefill_workers or 1), int(p.prefill_tp or 1),
               int(p.prefill_attention_dp or 1), int(p.prefill_ep or 1))
        if key not in best or stated > best[key][0]:
            best[key] = (stated, p)
    rows = []
    for key, (stated, p) in sorted(best.items()):
        priced = priced_input_per_prefill_gpu(p)
        rows.append({"gpu": key[0], "engine": key[1], "precision": key[2], "isl": key[3],
                     "prefill": f"{key[4]}x TP{key[5]}" + (f" DPA{key[6]}" if key[6] > 1 else "") + (f" EP{key[7]}" if key[7] > 1 else ""),
                     "measured_tok_s_per_gpu": round(stated), "at_concurrency": int(p.concurrency or 0), "ttft_ms": round(p.ttft_ms or 0),
                     "priced_tok_s_per_gpu": round(priced) if priced else None,
                     "priced_over_measured": round(priced / stated, 2) if priced else None})
    cols = list(rows[0]) if rows else []
    print(f"{a.file}: disaggregated prefill throughput per GPU, the highest each deployment states over its loads, "
          "against the busy prefill worker simfront prices\n")
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join("" if r[c] is None else str(r[c]) for c in cols))
    groups: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        if r["priced_over_measured"]:
            groups[(r["gpu"], r["engine"], r["precision"])].append(r["priced_over_measured"])
    print("\nmedian priced / measured by GPU, engine and precision (above 1: the prefill priced faster than it ran)")
    summary = [{"gpu": g, "engine": e, "precision": pr, "deployments": len(v), "median": round(float(np.median(v)), 2)}
               for (g, e, pr), v in sorted(groups.items())]
    for s in summary:
        print(f"  {s['gpu']} {s['engine']} {s['precision']}: {s['deployments']} deployments, {s['median']}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
