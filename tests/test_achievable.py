"""Achievable peaks in hardware/*.yaml: every catalog GPU has them, each sourced or marked as an estimate."""

from __future__ import annotations

import pytest
import yaml
from pydantic import ValidationError

from simfront.hardware import HARDWARE_DIR, MATMUL_DTYPES, Achievable, catalog

GPUS = sorted(catalog())


@pytest.mark.parametrize("gid", GPUS)
def test_every_catalog_gpu_has_achievable_peaks_with_a_source_or_an_estimate_mark(gid):
    raw = yaml.safe_load((HARDWARE_DIR / f"{gid}.yaml").read_text())
    a = raw.get("achievable")
    assert a, f"{gid}: no achievable block"
    need = [d for d in MATMUL_DTYPES if d in raw["peak_flops_per_s"]]
    assert "bf16" in need
    entries = [a["matmul_flops_per_s"][d] for d in need] + [a["hbm_bandwidth_bytes_per_s"]]
    entries += [a["collectives"][a["scaleup_link_kind"]], a["collectives"]["nic"]]
    for e in entries + list(a["collectives"].values()):
        assert e.get("source") or (e.get("estimate") is True and e.get("reasoning")), (gid, e)


@pytest.mark.parametrize("gid", GPUS)
def test_achievable_peaks_never_exceed_the_datasheet(gid):
    hw = catalog()[gid]
    for d, v in hw.achievable.matmul_flops_per_s.items():
        peak = hw.peak_flops_per_s["fp8" if d == "fp8_block" else d]
        assert 0.3 * peak <= v.value <= peak, (gid, d)
    assert 0.5 * hw.hbm_bandwidth_bytes_per_s <= hw.achievable_hbm_bytes_per_s <= hw.hbm_bandwidth_bytes_per_s
    up = hw.collective_peak("scaleup")
    # NVLink SHARP reduces inside the switch, so an all-reduce's busbw may edge past the link (8xH200: 460 of 450)
    assert up.bus_bandwidth_bytes_per_s <= hw.scaleup.bandwidth_bytes_per_s * (1.05 if hw.scaleup.topology == "switch" else 1.0)
    assert hw.collective_peak("scaleout").bus_bandwidth_bytes_per_s <= hw.scaleout_bandwidth_bytes_per_s
    assert 1e-6 < up.latency_s < 1e-4


def test_the_issue_examples_are_in_the_data():
    cat = catalog()
    # L40S: the measured BF16 maximum is well under the datasheet (72 %; its median 57 %)
    assert cat["l40s"].achievable_matmul_flops_per_s("bf16") / cat["l40s"].peak_flops_per_s["bf16"] < 0.75
    # AMD publishes max-achievable FLOPs well below peak (MI300X BF16 708 of 1,307)
    assert cat["mi300x"].achievable_matmul_flops_per_s("bf16") == pytest.approx(708e12)
    # PCIe-only 8-GPU all-reduce on L40S: ~1.5 GB/s, not the 32 GB/s link rate
    assert cat["l40s"].collective_peak().bus_bandwidth_bytes_per_s < 3e9
    assert cat["mi300x"].achievable.scaleup_link_kind == "xgmi_mesh"


def test_an_unsourced_unmarked_figure_is_rejected():
    good = {"value": 1e12, "source": "x"}
    coll = {"bus_bandwidth_bytes_per_s": 1e9, "latency_s": 1e-5, "source": "x"}
    Achievable(matmul_flops_per_s={"bf16": good}, hbm_bandwidth_bytes_per_s=good, scaleup_link_kind="nvswitch",
               collectives={"nvswitch": coll, "nic": coll})
    with pytest.raises(ValidationError, match="source"):
        Achievable(matmul_flops_per_s={"bf16": {"value": 1e12}}, hbm_bandwidth_bytes_per_s=good,
                   scaleup_link_kind="nvswitch", collectives={"nvswitch": coll, "nic": coll})
    with pytest.raises(ValidationError, match="reasoning"):
        Achievable(matmul_flops_per_s={"bf16": {"value": 1e12, "estimate": True}}, hbm_bandwidth_bytes_per_s=good,
                   scaleup_link_kind="nvswitch", collectives={"nvswitch": coll, "nic": coll})
    with pytest.raises(ValidationError, match="nic"):
        Achievable(matmul_flops_per_s={"bf16": good}, hbm_bandwidth_bytes_per_s=good, scaleup_link_kind="nvswitch",
                   collectives={"nvswitch": coll})


def test_estimated_peaks_are_listed_and_measured_ones_are_not():
    h100, mi355 = catalog()["h100_sxm"], catalog()["mi355x"]
    assert "matmul_flops_per_s.bf16" not in h100.estimated_peaks()
    assert "hbm_bandwidth_bytes_per_s" not in h100.estimated_peaks()
    assert {"matmul_flops_per_s.bf16", "matmul_flops_per_s.fp4", "collectives.xgmi_mesh"} <= set(mi355.estimated_peaks())
