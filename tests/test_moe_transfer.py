"""Fitted MoE classes that describe one platform's kernel library (hardware/kernels.yaml efficiency_class):
another platform takes the sibling class's values (gemm.transfer_params for kind moe), and provenance says so."""

from __future__ import annotations

import numpy as np
import pytest

from simfront import efficiency, gemm, kernels, moe
from simfront.hardware import get_hardware

H100, H200, B200, L40S, MI300X = (get_hardware(g) for g in ("h100_sxm", "h200_sxm", "b200_sxm", "l40s", "mi300x"))


def test_classes_swap_only_where_the_kernel_library_differs():
    assert kernels.class_swaps("moe", H100, H200) == {}  # both sm_90: the same CUTLASS / Triton kernels
    assert kernels.class_swaps("moe", B200, get_hardware("b300_sxm")) == {}  # sm_100 and sm_103 run the same
    swapped = {"fp8_block": "fp8", "wonly": "bf16"}
    for src, dst in ((H100, L40S), (H100, MI300X)):
        assert kernels.class_swaps("moe", src, dst) == swapped, (src.id, dst.id)
    # the fitted MXFP4 class describes sm_100's trtllm-gen kernel (moe_fused_mxfp4): any other platform, the CDNA4
    # part that borrows Blackwell's values included, takes per-tensor FP8's
    for src, dst in ((H100, B200), (B200, H100)):
        assert kernels.class_swaps("moe", src, dst) == {**swapped, "mxfp4": "fp8"}, (src.id, dst.id)
    assert kernels.class_swaps("moe", B200, get_hardware("mi355x"))["mxfp4"] == "fp8"
    assert kernels.class_swaps("gemm", H100, B200) == {}  # no GEMM op carries an efficiency class
    notes = kernels.class_swap_notes("moe", H100, B200)
    assert any("deepgemm-moe" in n and "cutlass-fp8-blockscale-moe" in n for n in notes)


def test_transfer_params_copies_the_sibling_values_and_nothing_else():
    p = {name: float(i + 1) for i, name in enumerate(moe.PARAMS)}
    same = gemm.transfer_params("moe", p, H100, H200)
    assert same == p
    out = gemm.transfer_params("moe", p, H100, B200)
    assert out is not p and p == {name: float(i + 1) for i, name in enumerate(moe.PARAMS)}  # input untouched
    for name in moe.PARAMS:
        if name.endswith("_fp8_block"):
            assert out[name] == p[name[: -len("fp8_block")] + "fp8"]
        elif name.endswith("_wonly"):
            assert out[name] == p[name[: -len("wonly")] + "bf16"]
        elif name.endswith("_mxfp4"):
            assert out[name] == p[name[: -len("mxfp4")] + "fp8"]
        else:
            assert out[name] == p[name]


def _cost(hw, fmt, p=None):
    return float(moe.moe_cost(64, 7168, 2048, 8, 256, 1, 8, fmt, hw, p=p).time_s)


def test_shipped_values_on_another_platform_are_the_transferred_ones():
    hopper = efficiency.params("moe", "hopper")
    # L40S borrows Hopper's block and runs neither calibrated block-FP8 MoE library
    assert _cost(L40S, "fp8_block") == pytest.approx(_cost(L40S, "fp8_block", gemm.transfer_params("moe", hopper, H100, L40S)))
    assert _cost(L40S, "fp8_block") != pytest.approx(_cost(L40S, "fp8_block", hopper))
    # H200 runs H100's kernels: its shipped values are Hopper's as fitted
    assert _cost(H200, "fp8_block") == pytest.approx(_cost(H200, "fp8_block", hopper))
    assert np.isfinite(_cost(MI300X, "fp8_block")) and _cost(MI300X, "fp8_block") > 0


def test_provenance_names_the_swapped_classes():
    moe_l40s = next(p for p in efficiency.provenance(L40S).params if p.kind == "moe")
    assert moe_l40s.borrowed and "fp8_block takes the fp8 values" in moe_l40s.note
    moe_h200 = next(p for p in efficiency.provenance(H200).params if p.kind == "moe")
    assert "takes the" not in moe_h200.note


def test_a_users_own_values_for_the_family_are_never_swapped():
    hopper = efficiency.params("moe", "hopper")
    mine = {"moe": {"ada": {"eta_compute_fp8_block": 0.2, "launch_s_fp8_block": 9e-5}}}
    with efficiency.using(mine):
        got = _cost(L40S, "fp8_block")
    expect = dict(gemm.transfer_params("moe", hopper, H100, L40S), eta_compute_fp8_block=0.2, launch_s_fp8_block=9e-5)
    assert got == pytest.approx(_cost(L40S, "fp8_block", expect))
    assert got != pytest.approx(_cost(L40S, "fp8_block"))


def test_every_calibration_entry_transfers_its_values_with_the_hook_the_scripts_call():
    """scripts/calibrate_kernels.py and scripts/leave_one_family_out.py call ``entry["transfer"](params, src, dst)``
    for every op: each kind's hook takes that signature and swaps only the kind's own classes."""
    from simfront.kernel_ops import all_ops, op_params

    for name, entry in all_ops().items():
        fn = entry.get("transfer")
        if fn is None:
            continue
        p = op_params(entry, H100)
        out = fn(p, H100, B200)
        assert isinstance(out, dict) and set(out) == set(p), name
        if entry["kind"] != "moe":  # no other kind carries a kernel-library class today
            assert out == p, name
    p = op_params(all_ops()["moe"], H100)
    assert all_ops()["moe"]["transfer"](p, H100, B200) == gemm.transfer_params("moe", p, H100, B200)
