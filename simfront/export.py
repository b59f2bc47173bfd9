"""Frontier points as rows of the measured-point CSV (the format ``simfront validate`` reads).

A predicted point written this way names its whole deployment (layout of each role, worker counts,
batch, token budget, precision, speculative decoding, client concurrency), so that a user can run it,
fill in the measured metrics and validate; with the predicted metrics in the metric columns the file
validates to itself, which is how the round-trip test checks that ``predict`` and ``validate`` share one
evaluator. Column meanings: :mod:`simfront.ingest.offline_csv`.
"""

from __future__ import annotations

import csv
import io
from typing import Iterable, Mapping

from .precision import weights_of
from .search import parse_spec_label

COLUMNS = ("model", "gpu", "num_gpus", "tp", "pp", "ep", "dp_attention", "disagg", "engine", "precision_weights", "precision_kv",
           "isl", "osl", "concurrency", "batch_size", "metric_ttft_ms", "metric_tpot_ms", "metric_tok_s_per_user",
           "metric_output_tok_s_total", "metric_output_tok_s_per_gpu", "metric_request_throughput", "notes")


def _spec_notes(label: str) -> list[str]:
    """``mtp-k2@0.8`` -> notes naming the method and draft length (``none`` -> nothing)."""
    method, k, _ = parse_spec_label(label)
    return [] if method is None else [f"spec_decoding={method}", f"spec_k={k}"]


def point_row(point: Mapping, model: str, gpu: str, isl: int, osl: int, engine: str, predicted: bool = True,
              wave_share: float = 0.0) -> dict:
    """One measured-point CSV row for a frontier point (``predicted``: fill the metric columns with
    the point's predicted metrics; else leave them for the user's measurements). ``wave_share``: the
    workload's share of requests in a synchronised start-up wave (0 for predict's steady state)."""
    p = point
    notes = _spec_notes(str(p.get("spec", "none"))) + [f"startup_wave_share={wave_share:g}"]
    gpus = int(p["gpus_used"])
    row = {c: "" for c in COLUMNS}
    row.update(model=model, gpu=gpu, num_gpus=gpus, engine=engine, isl=int(isl), osl=int(osl), concurrency=p["concurrency"],
               precision_weights=weights_of(p["precision"]), precision_kv=p["kv_dtype"])
    if p["mode"] == "disagg":
        pre = (f"prefill_workers={p['prefill_workers']};prefill_tp={p['prefill_tp']};prefill_ep={p['prefill_ep']};"
               f"prefill_attention_dp={p['prefill_attention_dp']};prefill_batch={p['prefill_batch'] * p['prefill_attention_dp']}")
        dec = (f"decode_workers={p['decode_workers']};decode_tp={p['tp']};decode_pp={p['pp']};decode_ep={p['ep']};"
               f"decode_attention_dp={p['attention_dp']};decode_batch={p['batch']}")
        row["disagg"] = f"{pre}|{dec}"
    else:
        row.update(disagg="false", tp=p["tp"], pp=p["pp"], ep=p["ep"], batch_size=p["batch"])
        notes += [f"attention_dp={p['attention_dp']}", f"token_budget={p['chunk_tokens']}"]
    if predicted:
        row.update(metric_ttft_ms=p["ttft_ms"], metric_tpot_ms=p["tpot_ms"], metric_tok_s_per_user=p["tok_s_user"],
                   metric_output_tok_s_total=p["requests_s"] * osl, metric_output_tok_s_per_gpu=p["requests_s"] * osl / gpus,
                   metric_request_throughput=p["requests_s"])
    row["notes"] = "; ".join(notes + (["simfront prediction"] if predicted else []))
    return row


def measured_csv(points: Iterable[Mapping], model: str, gpu: str, isl: int, osl: int, engine: str, predicted: bool = True,
                 wave_share: float = 0.0) -> str:
    """CSV text of :func:`point_row` for every point."""
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=list(COLUMNS))
    w.writeheader()
    for p in points:
        w.writerow(point_row(p, model, gpu, isl, osl, engine, predicted, wave_share))
    return out.getvalue()
