"""Shared loader for the calibration kernel CSVs used by the op tests."""

import csv
import os
from pathlib import Path

import numpy as np

KERNEL_DIR = Path(os.environ.get("SIMFRONT_KERNEL_DATA", Path(__file__).resolve().parents[2] / "shared" / "calibration" / "kernels"))


def load_columns(gpu: str, op: str) -> dict[str, np.ndarray]:
    """One calibration file as column arrays (numeric where every value parses)."""
    with (KERNEL_DIR / f"{gpu}__{op}.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    cols = {}
    for k in rows[0]:
        vals = [r[k] for r in rows]
        try:
            cols[k] = np.array(vals, dtype=float)
        except ValueError:
            cols[k] = np.array(vals)
    return cols


def sample_ape(entry: dict, kind: str, gpu: str, op: str, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(predictions, absolute percentage errors) of a calibration-registry op on ``n`` sampled rows."""
    from simfront import efficiency
    from simfront.hardware import get_hardware

    cols = load_columns(gpu, op)
    pick = np.random.default_rng(seed).choice(len(cols["latency_us"]), n, replace=False)
    cols = {k: v[pick] for k, v in cols.items()}
    hw = get_hardware(gpu)
    pred = entry["predict"](cols, hw, efficiency.params(kind, hw.family))
    return pred, np.abs(pred / (cols["latency_us"] * 1e-6) - 1)


def check_registry_contract(ops: dict, kind: str) -> None:
    """Every op of ``kind``: bounded defaults, no parameter shared between ops, fitted for both calibrated families."""
    from simfront import efficiency

    names = set()
    for op, entry in ops.items():
        assert entry["kind"] == kind
        for name, (default, lo, hi) in entry["params"].items():
            assert 0 < lo <= default <= hi, name
            assert name not in names, f"{name} shared between ops of one kind"
            names.add(name)
        for fam in ("hopper", "blackwell"):
            assert set(entry["params"]) <= set(efficiency.params(kind, fam)), (op, fam)


def more_hbm(hw, factor):
    """``hw`` with ``factor`` x the HBM bandwidth, datasheet and achievable (the kernel models use the latter)."""
    a = hw.achievable
    hbm = a.hbm_bandwidth_bytes_per_s.model_copy(update={"value": a.hbm_bandwidth_bytes_per_s.value * factor})
    return hw.model_copy(update={"hbm_bandwidth_bytes_per_s": hw.hbm_bandwidth_bytes_per_s * factor,
                                 "achievable": a.model_copy(update={"hbm_bandwidth_bytes_per_s": hbm})})
