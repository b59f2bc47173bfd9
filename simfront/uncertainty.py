"""Prediction intervals: p10-p90 bands from validation residuals, wider off the calibration data."""

from __future__ import annotations

import numpy as np

from .efficiency import _load, borrowed_family_widening

# Band widening outside the calibration data (log-width multiplier) where no held-out residuals
# measure it: a model absent from the fit, or a new GPU of a fitted family, sees errors at least like
# leave-one-model-out ones; 1.5x is a round guard. A GPU whose family borrows another family's
# parameters widens by the leave-one-family-out factor instead (hardware/efficiency/transfer.yaml).
EXTRAPOLATION_WIDENING = 1.5


def calibrated_gpus() -> list[str]:
    """GPUs of the measured serving runs the shipped serving profile was fitted on (hardware/efficiency/serving.yaml)."""
    return list(_load("serving").get("calibrated_gpus") or [])


def prediction_bands(gpu_id: str, model_id: str) -> tuple[dict, float]:
    """(p10/p90 log-ratio quantiles per metric, widening factor) for a GPU and model.

    The quantiles come from the leave-one-model-out residuals of the shipped calibration
    (hardware/efficiency/serving.yaml); a GPU or model outside the calibration data widens them: a GPU
    whose kernel parameters are borrowed from another family by the factor measured on
    leave-one-family-out residuals (``scripts/leave_one_family_out.py``), any other uncalibrated GPU
    by ``EXTRAPOLATION_WIDENING``.
    """
    data = _load("serving")
    q = data.get("uncertainty") or {}
    widen = 1.0
    if gpu_id not in calibrated_gpus():
        widen *= _gpu_widening(gpu_id)
    if model_id not in (data.get("calibrated_models") or []):
        widen *= EXTRAPOLATION_WIDENING
    return q, widen


def _gpu_widening(gpu_id: str) -> float:
    """Widening for an uncalibrated GPU: the leave-one-family-out factor when its parameters are borrowed."""
    from .efficiency import provenance
    from .errors import SimfrontError

    try:
        prov = provenance(gpu_id)
    except SimfrontError:
        return EXTRAPOLATION_WIDENING  # not a catalog GPU: the round guard
    lofo = borrowed_family_widening()
    if any(p.borrowed for p in prov.params) and lofo is not None:
        return lofo
    return EXTRAPOLATION_WIDENING


def band_ratio(q: dict, metric: str, widen: float) -> tuple[float, float] | None:
    """(low, high) of measured / predicted for ``metric``: the p10-p90 band of :func:`prediction_bands`' quantiles
    ``q`` widened by ``widen``, or None where ``q`` has no band for the metric."""
    b = q.get(metric)
    if not b:
        return None
    # the band always holds the prediction itself: a biased residual distribution (both quantiles on
    # one side) moves the far edge, never the prediction out of its own band
    return float(np.exp(min(b["p10"], 0.0) * widen)), float(np.exp(max(b["p90"], 0.0) * widen))


def add_bands(point: dict, q: dict, widen: float) -> dict:
    """Add ``*_low`` / ``*_high`` (p10-p90 of where the measured value should land) to a frontier point."""
    def put(field, r, digits):  # the band's edges, rounded outward of the prediction (never past it)
        v = point[field]
        point[f"{field}_low"], point[f"{field}_high"] = min(v, round(v * r[0], digits)), max(v, round(v * r[1], digits))

    r = band_ratio(q, "ttft_ms", widen)
    if r:
        put("ttft_ms", r, 3)
    tpot = band_ratio(q, "tpot_ms", widen)
    if tpot:
        put("tpot_ms", tpot, 4)
        point["tok_s_user_low"], point["tok_s_user_high"] = round(1000 / point["tpot_ms_high"], 3), round(1000 / point["tpot_ms_low"], 3)
    # tok/s/GPU: its own band, else TPOT's inverted (throughput goes as 1 / TPOT)
    r = band_ratio(q, "output_tok_s_total", widen) or tpot and (1 / tpot[1], 1 / tpot[0])
    if r:
        put("tok_s_gpu", r, 3)
        if point.get("usd_per_mtok"):
            point["usd_per_mtok_low"] = round(point["usd_per_mtok"] / r[1], 4)
            point["usd_per_mtok_high"] = round(point["usd_per_mtok"] / r[0], 4)
    return point
