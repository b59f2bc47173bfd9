#!/usr/bin/env python
"""Speculative-decoding acceptance the public InferenceX runs imply, against simfront's acceptance table.

    python scripts/acceptance_from_itl.py [snapshot.json] [--report docs/acceptance_from_itl.md] [--json out.json]

A benchmark client's mean ITL is the mean time between streamed chunks and its TPOT the mean time per output token.
A server that streams every ``N`` decode steps (SGLang ``--stream-interval``, the Dynamo frontends' chunking) gives
ITL / TPOT = N without speculative decoding, and N x (tokens accepted per step) with it, since each verify step
emits its accepted tokens together. So per (GPU, framework, container image) the runs without speculation give N
(their ITL / TPOT cluster on an integer), and each MTP run's acceptance length is its ITL / TPOT over N. Where a GPU
and framework have no runs without speculation at all, N is the engine's default (SGLang ``--stream-interval 1``),
said so in the table.
Nothing is fitted: this checks ``models/speculative.yaml`` against runs it was not taken from, and separates a
TPOT error into acceptance and step time (the step is ITL / N).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from simfront import yamlio  # noqa: E402
from _emit import emit  # noqa: E402
from _runs import run_urls  # noqa: E402

DEFAULT_FILE = ROOT / "measurements" / "inferencex_api_snapshot.json"
SPEC_TABLE = ROOT / "models" / "speculative.yaml"
INTEGER_TOLERANCE = 0.05  # non-speculative ITL / TPOT within 5 % of an integer counts as that stream interval
# tokens per verify step a run can show: above one (a draft accepted now and then; exactly one is a server that streams
# token by token) and at most the longest draft simfront searches (4) plus the bonus token
ACCEPTANCE_RANGE = (1.0 + INTEGER_TOLERANCE, 5.0)
# stream interval of a framework whose runs without speculation are missing: the engine's default
# (SGLang server_args.py stream_interval = 1); None: no default known, the runs are not read
DEFAULT_INTERVAL = {"sglang": 1, "dynamo-sglang": 1, "mori-sglang": 1}


def _ratio(run: dict) -> float | None:
    """ITL / TPOT of a run (None when either is missing or not positive)."""
    m = run.get("metrics") or {}
    itl, tpot = m.get("mean_itl"), m.get("mean_tpot")
    return itl / tpot if itl and tpot and itl > 0 and tpot > 0 else None


def _key(run: dict) -> tuple[str, str, str]:
    """The runs that share a stream interval: one GPU, framework and container image (the recipe sets the interval)."""
    return run["hardware"], run["framework"], str(run.get("image") or "")


def stream_intervals(runs: list[dict]) -> dict[tuple[str, str, str], tuple[list[int], str]]:
    """(GPU, framework, image) -> (the stream intervals its runs without speculative decoding show, how found).

    A plain run's ITL / TPOT within ``INTEGER_TOLERANCE`` of an integer is that interval; one image's runs may use
    several (recipes set their own). Where a GPU and framework have no plain run under any image, the engine's
    default interval where one is known; where they have plain runs under other images only, none (the recipe of
    that image may set another interval)."""
    plain: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    plain_any: set[tuple[str, str]] = set()
    for run in runs:
        r = _ratio(run)
        if r is not None and run.get("spec_method") in (None, "none"):
            plain[_key(run)].append(r)
            plain_any.add(_key(run)[:2])
    out: dict[tuple[str, str, str], tuple[list[int], str]] = {}
    for key in {_key(run) for run in runs}:
        ratios = plain.get(key, [])
        found = sorted({int(round(r)) for r in ratios if round(r) >= 1 and abs(r / round(r) - 1.0) <= INTEGER_TOLERANCE})
        if found:
            out[key] = (found, f"{len(ratios)} runs without speculation, same image")
        elif key[:2] not in plain_any and key[1] in DEFAULT_INTERVAL:
            out[key] = ([DEFAULT_INTERVAL[key[1]]], "engine default, no runs without speculation")
        else:
            out[key] = ([], "no runs without speculation of this image")
    return out


def implied_acceptance(runs: list[dict]) -> tuple[list[dict], dict[str, int]]:
    """Rows for the speculative runs whose stream interval is the one candidate that gives a possible acceptance
    length (ACCEPTANCE_RANGE), with their implied tokens per verify step and step time; and counts of the runs left
    out, by reason."""
    intervals = stream_intervals(runs)
    rows, left_out = [], defaultdict(int)
    for run in runs:
        if run.get("spec_method") in (None, "none"):
            continue
        r = _ratio(run)
        candidates, how = intervals[_key(run)]
        fits = [n for n in candidates if r is not None and ACCEPTANCE_RANGE[0] < r / n <= ACCEPTANCE_RANGE[1]]
        if r is None:
            left_out["no ITL or TPOT"] += 1
            continue
        if len(fits) != 1:
            reason = ("no stream interval known (no run without speculation of the same image)" if not candidates else
                      "ITL equals TPOT: tokens streamed one by one, acceptance not visible" if abs(r - 1.0) <= INTEGER_TOLERANCE
                      else "no single stream interval gives a possible acceptance length")
            left_out[reason] += 1
            continue
        n = fits[0]
        rows.append({"hardware": run["hardware"], "framework": run["framework"], "spec_method": run["spec_method"],
                     "run_url": run.get("run_url"), "precision": run.get("precision"),
                     "isl": run["isl"], "osl": run["osl"], "conc": run["conc"], "date": run.get("date"),
                     "stream_interval": n, "interval_from": how, "acceptance_length": r / n,
                     "step_ms": run["metrics"]["mean_itl"] * 1e3 / n, "tpot_ms": run["metrics"]["mean_tpot"] * 1e3})
    return rows, dict(left_out)


CALIBRATION_FILE = ROOT / "measurements" / "inferencemax_b200_h100.csv"  # the same runs, with their recipes' draft counts


def split_calibration_rows(rows: list[dict], path: Path = CALIBRATION_FILE) -> list[dict]:
    """The calibration file's MTP rows that are runs read above (same GPU, run URL, precision, concurrency and lengths), each with its
    measured and predicted acceptance length and verify-step time: simfront's TPOT error split into the two.

    Predicted step = predicted TPOT x predicted acceptance length (the recipe's draft count through
    ``models/speculative.yaml``); measured step = ITL / stream interval."""
    from simfront.hardware import get_hardware
    from simfront.speculative import family_for, survival
    from simfront.validation import validate_files

    keyed: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:  # one workflow run can benchmark several GPUs: the GPU is part of the key
        keyed[(get_hardware(r["hardware"]).id, r["run_url"], str(r["precision"]), float(r["conc"]), float(r["isl"]),
               float(r["osl"]))].append(r)
    by_run = {key: rs[0] for key, rs in keyed.items() if len(rs) == 1}  # a run of several deployments cannot be told apart
    urls = run_urls(path)
    out = []
    for v in validate_files([str(path)])["serving"]["rows"]:
        k = v.get("spec_k")
        if not v.get("spec_decoding") or not k or v.get("predicted_tpot_ms") is None:
            continue
        run = by_run.get((get_hardware(str(v["gpu"])).id, urls.get(int(v["line"])), str(v["precision"]),
                          float(v["concurrency"]), float(v["isl"]), float(v["osl"])))
        if run is None:
            continue
        family, _ = family_for(str(v["spec_decoding"]), "deepseek-r1")
        al_pred = 1.0 + sum(survival(family, int(k)))  # tokens per verify step the evaluator assumes
        step_pred = v["predicted_tpot_ms"] * al_pred
        out.append({"gpu": v["gpu"], "engine": v["engine"], "mode": v["mode"], "isl": int(v["isl"]), "osl": int(v["osl"]),
                    "concurrency": int(v["concurrency"]), "drafts": int(k), "acceptance_measured": run["acceptance_length"],
                    "acceptance_predicted": al_pred, "step_ms_measured": run["step_ms"], "step_ms_predicted": step_pred,
                    "step_ratio": step_pred / run["step_ms"], "tpot_ratio": v["predicted_tpot_ms"] / v["tpot_ms"]})
    return out


def table_lengths(family: str = "deepseek-mtp") -> dict[int, float]:
    """Acceptance length per draft length of a drafter family in models/speculative.yaml."""
    data = yamlio.load(SPEC_TABLE)
    return {int(k): float(v) for k, v in data["families"][family]["acceptance_lengths"].items()}


def report(rows: list[dict], left_out: dict[str, int], split: list[dict] | None = None) -> str:
    table = table_lengths()
    lines = ["# Acceptance lengths implied by the InferenceX runs", "",
             "Produced by `python scripts/acceptance_from_itl.py` from `measurements/inferencex_api_snapshot.json` "
             "(DeepSeek-R1, never fitted on). Implied acceptance = (mean ITL / mean TPOT) / stream interval; the stream "
             "interval is one where the same GPU, framework and image's runs without speculation put ITL / TPOT, the one that "
             "gives a possible acceptance length (above 1, at most 5). simfront's table "
             "(`models/speculative.yaml`, deepseek-mtp): " + ", ".join(f"{k} drafts {v:.2f}" for k, v in sorted(table.items()))
             + ". The API does not record the draft count of a run.", "",
             "| GPU | framework | ISL/OSL | runs | stream interval (from) | acceptance length, median (min-max) |",
             "|---|---|---|---:|---|---|"]
    groups: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        groups[(r["hardware"], r["framework"], f"{r['isl']}/{r['osl']}")].append(r)
    for (hw, fw, lens), rs in sorted(groups.items()):
        al = np.array([r["acceptance_length"] for r in rs])
        ns = sorted({r["stream_interval"] for r in rs})
        lines.append(f"| {hw} | {fw} | {lens} | {len(rs)} | {', '.join(map(str, ns))} ({rs[0]['interval_from']}) | "
                     f"{np.median(al):.2f} ({al.min():.2f}-{al.max():.2f}) |")
    if left_out:
        lines += ["", "Speculative runs not read: " + "; ".join(f"{n} x {why}" for why, n in sorted(left_out.items())) + "."]
    if split:
        lines += ["", "## simfront's TPOT error split into acceptance and step", "",
                  "The runs above that are rows of `measurements/inferencemax_b200_h100.csv` (same run, concurrency and "
                  "lengths), predicted with that file's recipe facts (draft counts): measured acceptance over the "
                  "acceptance simfront assumes for the recipe's drafts, and simfront's verify step (predicted TPOT x "
                  "assumed acceptance) over the measured one (ITL / stream interval). Medians per group.", "",
                  "| GPU | engine | mode | rows | drafts | acceptance measured / assumed | step predicted / measured | TPOT predicted / measured |",
                  "|---|---|---|---:|---|---:|---:|---:|"]
        groups2: dict[tuple, list[dict]] = defaultdict(list)
        for r in split:
            groups2[(r["gpu"], r["engine"], r["mode"])].append(r)
        for (gpu, eng, mode), rs in sorted(groups2.items()):
            med = lambda key: float(np.median([r[key] for r in rs]))  # noqa: E731
            al = float(np.median([r["acceptance_measured"] / r["acceptance_predicted"] for r in rs]))
            drafts = ", ".join(str(d) for d in sorted({r["drafts"] for r in rs}))
            lines.append(f"| {gpu} | {eng} | {mode} | {len(rs)} | {drafts} | {al:.2f} | {med('step_ratio'):.2f} "
                         f"({min(r['step_ratio'] for r in rs):.2f}-{max(r['step_ratio'] for r in rs):.2f}) | {med('tpot_ratio'):.2f} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    ap.add_argument("--report", type=Path, default=None)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)
    runs = json.loads(Path(args.file).read_text())
    rows, left_out = implied_acceptance(runs)
    text = report(rows, left_out, split_calibration_rows(rows) if CALIBRATION_FILE.exists() else None)
    emit(text, args.report, args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
