"""Provenance of kernel parameters per GPU, leave-one-family-out band widening, context-local profiles."""

from __future__ import annotations

import threading

import pytest
import yaml

from simfront import efficiency
from simfront.efficiency import EFFICIENCY_DIR, borrowed_family_widening, params, provenance, set_override, using
from simfront.gemm import gemm_cost
from simfront.hardware import get_hardware
from simfront.uncertainty import EXTRAPOLATION_WIDENING, prediction_bands


@pytest.mark.parametrize("gpu,src", [("l40s", "hopper"), ("mi300x", "hopper"), ("a100_sxm", "hopper"), ("mi355x", "blackwell")])
def test_gpus_outside_the_fitted_families_say_whose_parameters_they_borrow(gpu, src):
    p = provenance(gpu)
    fitted = {x.kind: x for x in p.params}
    for kind in ("gemm", "comm", "attention", "mla", "moe"):
        assert fitted[kind].borrowed and fitted[kind].source_family == src, kind
    assert any(f"borrowed from {src}" in n for n in p.notes)
    assert p.estimated_peaks == get_hardware(gpu).estimated_peaks()
    assert p.band_widening == pytest.approx(borrowed_family_widening())


def test_fitted_families_are_not_borrowed_and_workstation_blackwell_is():
    for gpu in ("h100_sxm", "h200_sxm", "b200_sxm", "gb300"):
        assert not any(x.borrowed for x in provenance(gpu).params), gpu
        assert provenance(gpu).band_widening == 1.0
    rtx = provenance("rtx_pro_6000_server")  # sm_120 on parameters fitted on sm_100
    assert all(x.borrowed for x in rtx.params if x.source_family)
    assert any("sm_100" in n for n in rtx.notes)


def test_the_widening_comes_from_the_leave_one_family_out_file():
    data = yaml.safe_load((EFFICIENCY_DIR / "transfer.yaml").read_text())
    assert data["fitted_by"] == "scripts/leave_one_family_out.py"
    assert borrowed_family_widening() == pytest.approx(data["borrowed_family_widening"])
    serving = yaml.safe_load((EFFICIENCY_DIR / "serving.yaml").read_text())
    if "l40s" not in (serving.get("calibrated_gpus") or []):
        _, w = prediction_bands("l40s", (serving.get("calibrated_models") or ["x"])[0])
        assert w == pytest.approx(data["borrowed_family_widening"])
    if "h200_sxm" not in (serving.get("calibrated_gpus") or []):
        _, w = prediction_bands("h200_sxm", (serving.get("calibrated_models") or ["x"])[0])
        assert w == pytest.approx(EXTRAPOLATION_WIDENING)


def test_two_profiles_side_by_side_without_touching_the_process_profile():
    hw = get_hardware("h100_sxm")
    shipped = gemm_cost(8192, 8192, 8192, "bf16", hw).time_s
    slow = {"gemm": {"default": {"eta_compute_bf16": 0.3}}}
    fast = {"gemm": {"hopper": {"eta_compute_bf16": 1.2}}}
    with using(slow):
        t_slow = gemm_cost(8192, 8192, 8192, "bf16", hw).time_s
        key_slow = efficiency.override_key()
        with using(fast):
            t_fast = gemm_cost(8192, 8192, 8192, "bf16", hw).time_s
            assert efficiency._overrides == fast  # caches keyed on the active profile see the inner one
        assert gemm_cost(8192, 8192, 8192, "bf16", hw).time_s == t_slow
    assert t_fast < shipped < t_slow
    assert key_slow != efficiency.override_key()
    assert gemm_cost(8192, 8192, 8192, "bf16", hw).time_s == shipped


def test_set_override_still_works_and_a_using_block_replaces_it_locally():
    try:
        set_override({"gemm": {"default": {"eta_compute_bf16": 0.3}}})
        assert params("gemm", "hopper")["eta_compute_bf16"] == 0.3
        with using(None):
            assert params("gemm", "hopper")["eta_compute_bf16"] != 0.3
        assert params("gemm", "hopper")["eta_compute_bf16"] == 0.3
    finally:
        set_override(None)


def test_threads_each_see_their_own_profile():
    seen = {}

    def run(name, value):
        with using({"gemm": {"default": {"eta_compute_bf16": value}}}):
            barrier.wait()
            seen[name] = params("gemm", "hopper")["eta_compute_bf16"]

    barrier = threading.Barrier(2)
    ts = [threading.Thread(target=run, args=("a", 0.4)), threading.Thread(target=run, args=("b", 0.9))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen == {"a": 0.4, "b": 0.9}
