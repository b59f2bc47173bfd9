"""Fitted parameters that sit at a bound of their allowed range, each with why (issues 13 and 14: explain or remove).

    python scripts/params_at_bounds.py [--sensitivity] [--check]

Reads every ``hardware/efficiency/*.yaml`` block and the serving profile, compares each fitted value (a kernel
family's ``fitted`` list: the parameters its data moved, not the priors or a sibling class's values) with the
(initial, low, high) range its module declares (``PARAMS`` of gemm, attention, mla, moe, comm, elementwise,
linear attention; attention and MLA through their ``CALIBRATION_OPS`` tables; and ``simfront.calibration.PARAMS``
for the serving profile), and lists the values within 1 % of the range's width of a bound, each with its entry in
``hardware/efficiency/at_bounds.yaml`` (reading and reason). Fits nothing: it only reads.

``--sensitivity``: for each listed value, the in-sample MAPE of the rows it prices (kernel rows of its family, and
of its format class where the name carries one; serving rows for the profile) at the fitted value, moved 10 % of
the range inward, and moved as far past the bound (a value outside the range, for the reading's evidence); the
kernel rows come from ``--data`` (the calibration kernels, absent in CI).
``--check``: exit 1 when a value has no entry or an entry no longer matches a value at a bound.
``--report PATH``: also write the list, each value's reading, reason and evidence, as markdown (docs/params_at_bounds.md
is this script's ``--sensitivity --report`` output, for readers without the calibration data).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import math
import sys
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

KINDS = {"gemm": "simfront.gemm", "attention": "simfront.attention", "mla": "simfront.mla", "moe": "simfront.moe",
         "comm": "simfront.comm", "elementwise": "simfront.elementwise", "linear_attention": "simfront.linear_attention",
         "serving": "simfront.calibration"}
LEDGER = ROOT / "hardware" / "efficiency" / "at_bounds.yaml"
READINGS = ("absent", "physical_limit", "interior", "compensating")  # at_bounds.yaml's header says what each means
NEAR = 0.01  # share of the allowed range within which a value counts as at its bound
LOG_RANGE = 100.0  # ranges wider than this ratio are judged in log space
STEP = 0.1  # share of the range a value is moved for --sensitivity
SERVING_DATA = ("measurements/measured_serving.csv", "measurements/inferencemax_b200_h100.csv")


def module_params(mod) -> dict:
    """(initial, low, high) ranges a module declares: ``PARAMS``, else the union of its calibration ops'
    tables (attention and MLA keep decode and prefill tables in ``CALIBRATION_OPS``)."""
    if hasattr(mod, "PARAMS"):
        return dict(mod.PARAMS)
    out: dict = {}
    for entry in getattr(mod, "CALIBRATION_OPS", {}).values():
        out.update(entry.get("params", {}))
    return out


def _log_scale(lo: float, hi: float, v: float) -> bool:
    """Whether a range is judged on a log scale: wide positive ranges."""
    return lo > 0 and hi / lo > LOG_RANGE and v > 0


def at_bound_rows(root: Path = ROOT) -> list[dict]:
    """Every fitted value within ``NEAR`` of a bound: {kind, family, name, value, lo, hi, side}."""
    rows = []
    for kind, module in KINDS.items():
        path = root / "hardware" / "efficiency" / f"{kind}.yaml"
        if not path.exists():
            continue
        try:
            params = module_params(importlib.import_module(module))
        except ImportError:
            continue
        if not params:
            continue
        doc = yaml.safe_load(path.read_text()) or {}
        fitted = doc.get("fitted")  # per family, the parameters its data moved (kernel kinds); the rest are priors
        for fam, vals in doc.get("families", {}).items():
            for name, v in (vals or {}).items():
                if name not in params or not isinstance(v, (int, float)):
                    continue
                if isinstance(fitted, dict) and name not in (fitted.get(fam) or []):
                    continue  # a prior or a sibling class's value (no rows of its class on the family): not fitted
                _, lo, hi = params[name]
                if hi <= lo:
                    continue  # a fixed value, not fitted
                if _log_scale(lo, hi, v):
                    a, b, x = math.log(lo), math.log(hi), math.log(v)
                else:
                    a, b, x = lo, hi, v
                span = b - a
                side = "low" if x <= a + NEAR * span else "high" if x >= b - NEAR * span else None
                if side:
                    rows.append({"kind": kind, "family": fam, "name": name, "value": float(v), "lo": lo, "hi": hi, "side": side})
    return rows


def load_ledger(path: Path = LEDGER) -> dict:
    """{kind: {parameter: {families, reading, reason}}} from at_bounds.yaml."""
    return yaml.safe_load(Path(path).read_text()) or {}


def ledger_check(rows: list[dict], ledger: dict) -> tuple[list[tuple[dict, dict]], list[dict], list[str]]:
    """(rows with their entry, rows without one, entries or entry families that match no value at a bound)."""
    explained, missing = [], []
    for r in rows:
        e = (ledger.get(r["kind"]) or {}).get(r["name"])
        if e and r["family"] in (e.get("families") or []):
            explained.append((r, e))
        else:
            missing.append(r)
    at = {(r["kind"], r["name"], r["family"]) for r in rows}
    stale = [f"{kind}.{name} ({fam})" for kind, entries in ledger.items() for name, e in (entries or {}).items()
             for fam in (e.get("families") or []) if (kind, name, fam) not in at]
    return explained, missing, stale


def entry_problems(ledger: dict) -> list[str]:
    """Entries without a known reading, a reason or a family list."""
    out = []
    for kind, entries in ledger.items():
        for name, e in (entries or {}).items():
            if not isinstance(e, dict) or e.get("reading") not in READINGS or not str(e.get("reason", "")).strip() \
                    or not e.get("families"):
                out.append(f"{kind}.{name}")
    return out


def moved(r: dict) -> tuple[float, float]:
    """(value moved ``STEP`` of the range inward, value moved as far past the bound), on the range's own scale."""
    lo, hi, v = r["lo"], r["hi"], r["value"]
    sign = 1.0 if r["side"] == "low" else -1.0
    if _log_scale(lo, hi, v):
        d = STEP * (math.log(hi) - math.log(lo))
        return math.exp(math.log(v) + sign * d), math.exp(math.log(v) - sign * d)
    d = STEP * (hi - lo)
    return v + sign * d, v - sign * d


def _mape(pred, meas) -> float:
    with np.errstate(all="ignore"):
        return float(np.nanmean(np.abs(np.asarray(pred) / np.asarray(meas) - 1.0)) * 100.0)


def kernel_sensitivity(rows: list[dict], data_dir: Path | None) -> dict[int, str]:
    """{row index: 'MAPE fitted / inward / past (n rows)'} for kernel kinds, on the family's calibration rows (and the
    format class the parameter names, where it names one)."""
    spec = importlib.util.spec_from_file_location("calibrate_kernels", ROOT / "scripts" / "calibrate_kernels.py")
    ck = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ck)
    from simfront import gemm, moe
    from simfront.hardware import get_hardware
    from simfront.kernel_ops import csv_format, op_params
    from simfront.precision import resolve_format

    args, ops = ck.kernel_args("", "", None, ["--no-write"] + (["--data", str(data_dir)] if data_dir else []))
    data = ck.load_data(args.data, ops)
    out: dict[int, str] = {}
    for i, r in enumerate(rows):
        if r["kind"] == "serving":
            continue
        blocks = (yaml.safe_load((ROOT / "hardware" / "efficiency" / f"{r['kind']}.yaml").read_text()) or {})["families"]
        cls = next((c for c in moe.MOE_CLASSES if r["name"].endswith("_" + c)), None)
        inward, past = moved(r)
        scores = np.zeros(3)
        n = 0
        for op, entry in ops.items():
            if entry["kind"] != r["kind"] or op not in data or r["name"] not in entry["params"]:
                continue
            for gpu, cols in data[op].items():
                hw = get_hardware(gpu)
                if r["family"] != "default" and hw.family != r["family"]:
                    continue
                if cls is not None and "dtype" in cols:
                    class_of = moe.moe_class if r["kind"] == "moe" else gemm.dtype_class
                    dtypes, which = np.unique(cols["dtype"], return_inverse=True)  # one class lookup per distinct dtype
                    mine = np.array([class_of(resolve_format(csv_format(d, hw), hw), hw) == cls for d in dtypes])
                    cols = ck.take(cols, mine[np.asarray(which).reshape(-1)])
                m = len(cols["latency_us"])
                if m == 0:
                    continue
                p = op_params(entry, hw, dict(blocks[r["family"]]))
                for j, v in enumerate((r["value"], inward, past)):
                    scores[j] += m * _mape(ck.predict_op(entry, cols, hw, {**p, r["name"]: v}), cols["latency_us"])
                n += m
        if n:
            f, a, b = scores / n
            out[i] = f"MAPE {f:.2f} % at the fitted value, {a:.2f} % at {inward:.3g} (inward), {b:.2f} % at {past:.3g} (past the bound); {n} rows"
    return out


def serving_sensitivity(rows: list[dict]) -> dict[int, str]:
    """{row index: 'TTFT / TPOT MAPE fitted / inward / past'} for the serving profile, on the calibration rows."""
    from simfront.calibration import NAMES, Fitter, error_table
    from simfront.ingest import load_measurements

    todo = [(i, r) for i, r in enumerate(rows) if r["kind"] == "serving"]
    if not todo:
        return {}
    points = load_measurements([str(ROOT / f) for f in SERVING_DATA]).points
    f = Fitter(points)
    fams = (yaml.safe_load((ROOT / "hardware" / "efficiency" / "serving.yaml").read_text()) or {})["families"]
    profiles = {e: {k: float(v) for k, v in p.items() if k in NAMES} for e, p in fams.items()}

    def score(profs) -> tuple[float, float]:  # (TTFT, TPOT) MAPE % over the fitted rows, as the calibration reports it
        err = error_table(points, f.predict(profs), f.rows)
        return err["ttft_ms"]["mape_pct"], err["tpot_ms"]["mape_pct"]

    out = {}
    for i, r in todo:
        inward, past = moved(r)
        s = [score({**profiles, r["family"]: {**profiles[r["family"]], r["name"]: v}}) for v in (r["value"], inward, past)]
        out[i] = (f"TTFT / TPOT MAPE {s[0][0]:.2f} / {s[0][1]:.2f} % at the fitted value, {s[1][0]:.2f} / {s[1][1]:.2f} % at "
                  f"{inward:.3g} (inward), {s[2][0]:.2f} / {s[2][1]:.2f} % at {past:.3g} (past the bound); {len(f.rows)} rows")
    return out


def _shown(path: Path) -> str:
    """A path relative to the repository where it lies inside it."""
    p = Path(path).resolve()
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else str(path)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sensitivity", action="store_true", help="also print the in-sample MAPE moved inward and past the bound")
    ap.add_argument("--data", type=Path, default=None, help="calibration kernels folder for --sensitivity")
    ap.add_argument("--check", action="store_true", help="exit 1 on a value without an entry, or a stale entry")
    ap.add_argument("--ledger", type=Path, default=LEDGER, help="the explanations (default: %(default)s)")
    ap.add_argument("--report", type=Path, default=None, help="also write the list as markdown to this file")
    a = ap.parse_args(argv)
    rows = at_bound_rows()
    ledger = load_ledger(a.ledger)
    explained, missing, stale = ledger_check(rows, ledger)
    evidence: dict[int, str] = {}
    if a.sensitivity:
        evidence.update(kernel_sensitivity(rows, a.data))
        evidence.update(serving_sensitivity(rows))
    print(f"{len(rows)} fitted values at a bound (within {NEAR:.0%} of the range); {len(rows) - len(missing)} explained in "
          f"{_shown(a.ledger)}, {len(missing)} not")
    entry_of = {id(r): e for r, e in explained}
    for i, r in enumerate(rows):
        e = entry_of.get(id(r))
        print(f"  {r['kind']:10} {r['family']:10} {r['name']:32} {r['value']:.4g}  ({r['side']} bound of [{r['lo']:.4g}, "
              f"{r['hi']:.4g}])  {e['reading'] if e else 'NOT EXPLAINED'}")
        if i in evidence:
            print(f"      {evidence[i]}")
    for s in stale:
        print(f"  stale entry (no longer at a bound): {s}")
    for s in entry_problems(ledger):
        print(f"  entry without a known reading, a reason or its families: {s}")
    if a.report:
        a.report.write_text(report_markdown(rows, entry_of, evidence, a.ledger))
        print(f"wrote {_shown(a.report)}")
    bad = missing or stale or entry_problems(ledger)
    return 1 if a.check and bad else 0


def report_markdown(rows: list[dict], entry_of: dict, evidence: dict[int, str], ledger: Path) -> str:
    """The list as a markdown report: one section per value, its reading, reason and (with --sensitivity) evidence."""
    import datetime as dt

    counts: dict[str, int] = {}
    for r in rows:
        e = entry_of.get(id(r))
        k = e["reading"] if e else "not explained"
        counts[k] = counts.get(k, 0) + 1
    out = ["# Fitted values at a bound of their range", "",
           f"Generated by `python scripts/params_at_bounds.py --sensitivity --report docs/params_at_bounds.md` on "
           f"{dt.date.today().isoformat()}. Readings and reasons: `{_shown(ledger)}` (its header defines the four "
           "readings); evidence: the in-sample MAPE of the rows the value prices at the fitted value, moved a tenth of "
           "the range inward, and as far past the bound.", "",
           f"{len(rows)} values within {NEAR:.0%} of a bound: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) + ".", ""]
    for i, r in enumerate(rows):
        e = entry_of.get(id(r)) or {}
        out += [f"## {r['kind']} / {r['family']} / `{r['name']}` = {r['value']:.4g}", "",
                f"- {r['side']} bound of [{r['lo']:.4g}, {r['hi']:.4g}]; reading: **{e.get('reading', 'not explained')}**"]
        if i in evidence:
            out.append(f"- evidence: {evidence[i]}")
        if e.get("reason"):
            out.append(f"- reason: {' '.join(str(e['reason']).split())}")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
