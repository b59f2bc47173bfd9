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

The stated throughput is the run's total input throughput over its prefill GPUs (InferenceX utils/summarize.py), so
it measures the prefill side's capacity only where the prefill side limited the run. The run's own record says
whether it did, with no model: by Little's law its clients spend TTFT / (TTFT + OSL x TPOT) of each request before
the first token, so ``concurrency`` x that share requests are, on average, queued for or inside a prefill step (less
those beyond the decode servers' batch caps, which wait for a decode slot); over
the prompts the prefill servers step at once (workers x attention-DP ranks x prompts per rank, the batch the
evaluator prices) that is the column ``in_prefill_per_slot``. A prompt that finds its server busy waits for the step
in progress, so up to about 2 requests per slot is a server keeping up; well above it (``SATURATED_PER_SLOT``) the
prompts queue and the stated throughput is the capacity. The medians are given over all deployments and over the
saturated ones alone.

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
# requests in the prefill stage per prompt slot above which a run's prefill servers were queueing (a prompt arriving
# at a busy server waits for the step in progress: about 1-2 per slot while the servers keep up)
SATURATED_PER_SLOT = 2.5
STATED = re.compile(r"stated_input_tput_per_prefill_gpu=([\d.]+)")


def stated_input_per_prefill_gpu(p) -> float | None:
    """The run's own input tokens/s per prefill GPU, from its notes (None where it states none)."""
    for key, val in (p.notes or {}).items():
        m = STATED.search(f"{key}={val}")
        if m:
            return float(m.group(1))
    return None


def in_prefill_per_slot(p) -> float | None:
    """Requests a run held before their first token (Little's law on its own TTFT and TPOT), per prompt the prefill
    servers step at once (workers x ranks x prompts per rank as the evaluator prices the row); None where unknown."""
    r, _ = resolve(p)
    if r is None or not (p.ttft_ms and p.tpot_ms and p.concurrency):
        return None
    d = disagg_rows([p], [0], r)
    ttft_s, decode_s = p.ttft_ms / 1e3, disagg_workload(r).mean_osl * p.tpot_ms / 1e3
    before_first = p.concurrency * ttft_s / (ttft_s + decode_s)  # clients before their first token, on average
    # clients beyond the decode servers' batch caps wait for a decode slot, not for a prefill step
    cap = float(np.ravel(d.decode_batch)[0])
    decode_slots = float(np.ravel(d.decode_workers)[0] * np.ravel(d.decode.dp)[0]) * cap if cap > 0 else np.inf
    in_prefill = max(before_first - max(p.concurrency - decode_slots, 0.0), 0.0)
    ranks = float(np.ravel(d.prefill.dp)[0])
    per_rank = max(float(np.ravel(d.prefill_batch)[0]) / ranks, 1.0)  # prompts one rank steps at once (disagg_prefill_raw)
    slots = float(np.ravel(d.prefill_workers)[0]) * ranks * per_rank
    return in_prefill / slots


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
                     "in_prefill_per_slot": None if (q := in_prefill_per_slot(p)) is None else round(q, 1),
                     "priced_tok_s_per_gpu": round(priced) if priced else None,
                     "priced_over_measured": round(priced / stated, 2) if priced else None})
    cols = list(rows[0]) if rows else []
    print(f"{a.file}: disaggregated prefill throughput per GPU, the highest each deployment states over its loads, "
          "against the busy prefill worker simfront prices\n")
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join("" if r[c] is None else str(r[c]) for c in cols))
    groups: dict[tuple, list[float]] = defaultdict(list)
    saturated: dict[tuple, list[float]] = defaultdict(list)
    for r in rows:
        if r["priced_over_measured"]:
            key = (r["gpu"], r["engine"], r["precision"])
            groups[key].append(r["priced_over_measured"])
            if (r["in_prefill_per_slot"] or 0) >= SATURATED_PER_SLOT:
                saturated[key].append(r["priced_over_measured"])
    print("\nmedian priced / measured by GPU, engine and precision (above 1: the prefill priced faster than it ran; "
          f"saturated: deployments whose best run held >= {SATURATED_PER_SLOT} requests per prefill slot, its prefill "
          "servers queueing, so that the stated throughput is their capacity)")
    summary = [{"gpu": g, "engine": e, "precision": pr, "deployments": len(v), "median": round(float(np.median(v)), 2),
                "saturated_deployments": len(saturated[(g, e, pr)]),
                "saturated_median": round(float(np.median(saturated[(g, e, pr)])), 2) if saturated[(g, e, pr)] else None}
               for (g, e, pr), v in sorted(groups.items())]
    for s in summary:
        sat = f"saturated {s['saturated_deployments']}, {s['saturated_median']}" if s["saturated_deployments"] else "none saturated"
        print(f"  {s['gpu']} {s['engine']} {s['precision']}: {s['deployments']} deployments, {s['median']}; {sat}")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
