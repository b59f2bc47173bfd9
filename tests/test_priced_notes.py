"""Provenance notes name what a prediction prices: fallback kernels and estimated peaks of the formats, KV dtypes
and worker sizes its configurations use, not every op and peak of the GPU (simfront/priced.py)."""

from __future__ import annotations

import pytest

from simfront import api, efficiency, kernels
from simfront.hardware import get_hardware
from simfront.priced import Priced, priced_configs, priced_of, priced_of_columns, worker_gpus
from simfront.models import get_model


def _priced(**kw) -> Priced:
    base = dict(attention=frozenset({"gqa"}), moe=False, weights=frozenset({"bf16"}), kv=frozenset({"bf16"}), multinode=False)
    base.update(kw)
    return Priced(**base)


def test_op_conditions_follow_the_model_format_and_cache():
    assert not kernels.op_priced("mla_decode", _priced())  # a GQA model never runs MLA decode
    assert kernels.op_priced("mla_decode", _priced(attention=frozenset({"mla"})))
    assert not kernels.op_priced("attention_decode_fp8_grouped", _priced())  # 16-bit cache
    assert kernels.op_priced("attention_decode_fp8_grouped", _priced(kv=frozenset({"fp8"})))
    assert kernels.op_priced("moe_fused_fp4", _priced(moe=True, weights=frozenset({"nvfp4"})))
    assert not kernels.op_priced("moe_fused_fp4", _priced(moe=True, weights=frozenset({"fp8_block"})))
    assert not kernels.op_priced("moe_fused_fp4", _priced(weights=frozenset({"nvfp4"})))  # a dense model
    assert kernels.op_priced("gemm", _priced()) and kernels.op_priced("gemm", None)


def test_ops_of_an_efficiency_class_follow_the_class_the_format_runs_on_the_gpu():
    """FP4 experts run weight-only where there are no FP4 tensor cores (H100), natively on B200."""
    m = get_model("deepseek-r1")
    on_h100 = priced_configs(m, get_hardware("h100_sxm"), [("nvfp4", "bf16", 8)])
    on_b200 = priced_configs(m, get_hardware("b200_sxm"), [("nvfp4", "bf16", 8)])
    assert kernels.op_priced("moe_weight_only_grouped", on_h100)
    assert not kernels.op_priced("moe_weight_only_grouped", on_b200)
    assert kernels.op_priced("moe_fp8_block_grouped", priced_configs(m, get_hardware("h100_sxm"), [("fp8_block", "bf16", 8)]))


def test_peaks_follow_the_formats_and_the_worker_size():
    p = _priced(weights=frozenset({"fp8_block"}))
    assert p.prices_peak("matmul_flops_per_s.fp8") and p.prices_peak("matmul_flops_per_s.bf16")
    assert not p.prices_peak("matmul_flops_per_s.int8")
    assert _priced(weights=frozenset({"int8"})).prices_peak("matmul_flops_per_s.int8")
    assert not p.prices_peak("collectives.nic") and _priced(multinode=True).prices_peak("collectives.nic")
    assert p.prices_peak("hbm_bandwidth_bytes_per_s") and p.prices_peak("collectives.nvswitch")


def test_priced_of_frontier_points():
    m = get_model("deepseek-r1")
    pts = [{"precision": "fp8_block+kvfp8", "kv_dtype": "fp8", "mode": "agg", "tp": 1, "pp": 4, "attention_dp": 4},
           {"precision": "nvfp4", "kv_dtype": "bf16", "mode": "disagg", "tp": 8, "pp": 1, "attention_dp": 1,
            "prefill_tp": 4, "prefill_attention_dp": 1}]
    assert worker_gpus(pts[0]) == 16 and worker_gpus(pts[1]) == 8
    p = priced_of(m, pts, get_hardware("h100_sxm"))
    assert p.attention == {"mla"} and p.moe and p.weights == {"fp8_block", "nvfp4"} and p.kv == {"fp8", "bf16"}
    assert p.multinode and not priced_of(m, pts[1:], get_hardware("h100_sxm")).multinode
    assert ("moe", "fp8_block") in p.classes and ("moe", "wonly") in p.classes  # NVFP4 experts on H100: weight-only


def test_predict_notes_name_only_what_the_frontier_prices():
    res = api.predict("deepseek-r1", "16xH200", isl=8192, osl=1024, precision="fp8_block")
    fr = res.frontier
    assert fr and {p["precision"].split("+kv")[0] for p in fr} == {"fp8_block"}
    notes = " ".join(res.notes)
    every = " ".join(efficiency.provenance("h200_sxm").notes)  # the GPU's notes without a prediction
    assert "moe_fused_fp4" in every and "moe_fused_fp4" not in notes  # no FP4 experts on this frontier
    assert "int8" in every and "int8" not in notes
    by_op = {k["op"]: k for k in res.provenance["kernels"]}
    assert by_op["moe_fused_fp4"]["priced"] is False and by_op["mla_decode"]["priced"] is True
    assert by_op["moe_fp8_block_grouped"]["priced"] is True
    # the structured fields still describe the GPU
    assert res.provenance["estimated_peaks"] == get_hardware("h200_sxm").estimated_peaks()


@pytest.mark.parametrize("gpus", ["8xL40S", "8xMI300X"])
def test_borrowed_parameters_stay_in_the_notes(gpus):
    res = api.predict("llama-3.1-70b", gpus, precision="fp8")
    assert any("borrowed from hopper" in n for n in res.notes)
    assert any(p["borrowed"] for p in res.provenance["params"])


def test_explain_marks_the_ops_its_step_prices():
    b = api.explain("llama-3.1-8b", "1xH100", batch=8, ctx=2048, kv_dtype="fp8")
    by_op = {k["op"]: k for k in b.provenance["kernels"]}
    assert by_op["attention_decode_fp8_grouped"]["priced"] is True and by_op["mla_decode"]["priced"] is False
    assert not any("moe_" in n for n in b.provenance["notes"])


def test_priced_of_columns_matches_the_points_one_by_one():
    """The column form (every configuration of a search) prices what its points do one by one."""
    import numpy as np

    m = get_model("deepseek-r1")
    hw = get_hardware("h100_sxm")
    pts = [{"precision": "fp8_block+kvfp8", "kv_dtype": "fp8", "mode": "agg", "tp": 1, "pp": 4, "attention_dp": 4,
            "prefill_tp": 0, "prefill_attention_dp": 0},
           {"precision": "nvfp4", "kv_dtype": "bf16", "mode": "disagg", "tp": 8, "pp": 1, "attention_dp": 1,
            "prefill_tp": 4, "prefill_attention_dp": 1}]
    cols = {k: np.array([p[k] for p in pts]) for k in pts[0]}
    assert priced_of_columns(m, cols, hw) == priced_of(m, pts, hw)
    assert priced_of_columns(m, {k: v[1:] for k, v in cols.items()}, hw) == priced_of(m, pts[1:], hw)


def test_a_load_no_configuration_meets_keeps_the_notes_to_what_was_searched():
    """With no frontier to show, the notes name what the searched configurations price, not every op of the GPU: a
    dense model's unmeetable rate says nothing about the GPU's FP4 MoE kernels."""
    res = api.predict("llama-3.1-8b", "1xH100", rate=1e9)
    assert "no configuration meets the load constraint" in res.notes and not res.frontier
    assert not [n for n in res.notes if "moe" in n]
    assert [n for n in kernels.fallback_notes(get_hardware("h100_sxm")) if "moe" in n]  # the GPU has MoE fallbacks


def test_a_format_without_its_tensor_cores_is_said_to_run_weight_only():
    """FP4 weights on Hopper and FP8 weights on Ampere run weight-only; the notes say so where those formats are priced."""
    from simfront.precision import format_fallback_notes

    h100, b200, a100 = (get_hardware(g) for g in ("h100_sxm", "b200_sxm", "a100_sxm"))
    assert format_fallback_notes(h100, ["nvfp4"]) == [
        "h100_sxm: no nvfp4 tensor cores: nvfp4 weights run weight-only (dequantised to bf16 in the GEMM, bf16 math), as priced"]
    assert format_fallback_notes(h100, ["fp8_block", "bf16"]) == [] and format_fallback_notes(b200, ["nvfp4"]) == []
    assert [n for n in format_fallback_notes(a100, None) if "fp8 weights" in n]  # every format, as for a GPU listing
    res = api.predict("llama-3.1-8b", "1xH100", precision="nvfp4")
    assert any("nvfp4 weights run weight-only" in n for n in res.notes)
    assert not any("weight-only" in n for n in api.predict("llama-3.1-8b", "1xH100", precision="fp8").notes)


def test_frontier_points_wider_than_any_measured_expert_parallel_run_say_what_is_not_priced():
    """Points that spread experts over more ranks than the calibration runs (EP > 8 on Blackwell) carry a note: the
    all-to-all is not overlapped with compute, the routing skew extrapolates, and the outside check's size."""
    from simfront import api
    from simfront.coverage import calibrated_layouts, wide_ep_note

    top = calibrated_layouts("blackwell")["ep"][1]
    res = api.predict("deepseek-r1", "72xGB200", isl=1024, osl=1024)
    wide = [p for p in res["frontier"] if max(p["ep"], p["prefill_ep"] or 1) > top]  # a worker of either role
    assert wide
    said = [n for n in res["notes"] if "spread experts over more than" in n]
    assert len(said) == 1 and said[0].startswith(f"{len(wide)} of the {len(res['frontier'])} frontier points")
    assert "power law 1.01" in said[0] and "--routing-skew balanced" in said[0] and "2.2x too slow" in said[0]
    bal = api.predict("deepseek-r1", "72xGB200", isl=1024, osl=1024, routing_skew="balanced")
    said = [n for n in bal["notes"] if "spread experts over more than" in n]
    assert len(said) == 1 and "power law" not in said[0] and "1.4x too slow" in said[0]
    narrow = api.predict("deepseek-r1", "8xB200", isl=1024, osl=1024)
    assert all(max(p["ep"], p["prefill_ep"] or 1) <= top for p in narrow["frontier"])
    assert not any("spread experts over more than" in n for n in narrow["notes"])
    assert wide_ep_note([{"ep": 8, "prefill_ep": 16}], {"ep": [1, 8]}, None).startswith("1 of the 1 frontier points")


def test_wide_ep_note_says_how_the_all_to_all_was_priced():
    """With --two-batch-overlap the note says the all-to-all was overlapped, and the outside check's size then."""
    from simfront.coverage import wide_ep_note

    plain = wide_ep_note([{"ep": 16}], {"ep": [1, 8]}, None)
    tbo = wide_ep_note([{"ep": 16}], {"ep": [1, 8]}, None, two_batch_overlap=True)
    assert "added to each step" in plain and "--two-batch-overlap prices it" in plain and "1.4x too slow" in plain
    assert "overlapped with the other micro-batch's compute (--two-batch-overlap)" in tbo and "1.01x" in tbo
