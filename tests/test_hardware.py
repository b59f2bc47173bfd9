"""The accelerator catalog (hardware/*.yaml): loading, sources, dense peaks, link directions, name resolution."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from simfront.errors import SimfrontError
from simfront.hardware import HARDWARE_DIR, Hardware, catalog, get_hardware, parse_gpus
from simfront.units import GiB, MiB
from kernel_data import KERNEL_DIR

CALIBRATION_E2E = KERNEL_DIR.parent / "e2e"

EXPECTED_IDS = {
    "a100_sxm", "a100_sxm_40gb", "h20", "h100_sxm", "h100_pcie", "h800_sxm", "h200_sxm", "b200_sxm", "b300_sxm", "gb200", "gb300",
    "l4", "l40s", "rtx_pro_6000_server", "mi300x", "mi325x", "mi355x",
}
NVIDIA_BLACKWELL = {"b200_sxm", "b300_sxm", "gb200", "gb300", "rtx_pro_6000_server"}

# Fields that carry a figure and must therefore cite a source (when set).
SOURCED_FIELDS = [
    "sm_count", "peak_flops_per_s", "hbm_bytes", "hbm_bandwidth_bytes_per_s", "l2_bytes", "scaleup",
    "scaleout_bandwidth_bytes_per_s", "power_w", "price_usd_per_hour",
]


def _spec_files() -> list[Path]:
    return [p for p in sorted(HARDWARE_DIR.glob("*.yaml")) if "peak_flops_per_s" in (yaml.safe_load(p.read_text()) or {})]


# ---------------------------------------------------------------- loading and sources


@pytest.mark.parametrize("path", _spec_files(), ids=lambda p: p.name)
def test_every_file_loads_and_its_id_matches_the_filename(path):
    hw = Hardware(**yaml.safe_load(path.read_text()))
    assert hw.id == path.stem


def test_catalog_holds_the_14_gpus():
    assert set(catalog()) == EXPECTED_IDS


@pytest.mark.parametrize("gid", sorted(EXPECTED_IDS))
def test_every_numeric_field_is_positive(gid):
    hw = catalog()[gid]
    for field in ["sm_count", "hbm_bytes", "hbm_bandwidth_bytes_per_s", "scaleout_bandwidth_bytes_per_s",
                  "power_w", "price_usd_per_hour", "gpus_per_node"]:
        assert getattr(hw, field) > 0, field
    assert hw.l2_bytes is None or hw.l2_bytes > 0
    assert hw.peak_flops_per_s and all(v > 0 for v in hw.peak_flops_per_s.values())
    assert hw.scaleup.domain_gpus > 0 and hw.scaleup.bandwidth_bytes_per_s > 0
    assert hw.scaleup.peer_bandwidth_bytes_per_s is None or hw.scaleup.peer_bandwidth_bytes_per_s > 0


@pytest.mark.parametrize("gid", sorted(EXPECTED_IDS))
def test_every_figure_has_a_source(gid):
    hw = catalog()[gid]
    for field in SOURCED_FIELDS:
        if getattr(hw, field) is not None:
            assert hw.sources.get(field, "").strip(), f"{gid}: no source for {field}"
    unknown_keys = set(hw.sources) - set(Hardware.model_fields)
    assert not unknown_keys, f"{gid}: sources for fields that do not exist: {unknown_keys}"


@pytest.mark.parametrize("gid", sorted(EXPECTED_IDS))
def test_families_and_fp4_formats(gid):
    hw = catalog()[gid]
    family = {"a100_sxm": "ampere", "a100_sxm_40gb": "ampere", "l4": "ada", "l40s": "ada", "h100_sxm": "hopper", "h100_pcie": "hopper", "h800_sxm": "hopper", "h20": "hopper",
              "h200_sxm": "hopper",
              "mi300x": "cdna3", "mi325x": "cdna3", "mi355x": "cdna4"}.get(gid, "blackwell")
    assert hw.family == family
    fp4 = ["nvfp4", "mxfp4"] if gid in NVIDIA_BLACKWELL else ["mxfp4"] if gid == "mi355x" else []
    assert sorted(hw.fp4_formats) == sorted(fp4)
    # a 4-bit tensor-core format needs an fp4 rate, and vice versa
    assert hw.supports("fp4") == bool(fp4)


# ---------------------------------------------------------------- dense, not sparse


def test_hopper_and_ada_peaks_are_dense():
    assert catalog()["h100_sxm"].peak_flops_per_s["bf16"] < 1.0e15  # sparse datasheet value is 1,979 TF
    assert catalog()["h200_sxm"].peak_flops_per_s["fp8"] < 2.0e15  # sparse 3,958 TF
    assert catalog()["l40s"].peak_flops_per_s["fp8"] < 1.0e15  # sparse 1,466 TF
    assert catalog()["a100_sxm"].peak_flops_per_s["bf16"] < 0.4e15  # sparse 624 TF


def test_blackwell_peaks_are_dense():
    b200 = catalog()["b200_sxm"].peak_flops_per_s
    assert b200["bf16"] == pytest.approx(2.25e15) and b200["fp4"] == pytest.approx(9.0e15)  # sparse: 4.5 / 18 PF
    assert catalog()["gb200"].peak_flops_per_s["fp4"] == pytest.approx(10.0e15)  # sparse 20 PF
    # Blackwell Ultra publishes dense NVFP4 directly; it is not half the sparse figure (specs.md pitfall 1)
    assert catalog()["b300_sxm"].peak_flops_per_s["fp4"] == pytest.approx(14.0e15)
    assert catalog()["gb300"].peak_flops_per_s["fp4"] == pytest.approx(15.0e15)


@pytest.mark.parametrize("gid", ["h100_sxm", "h200_sxm", "h20", "b200_sxm", "gb200", "b300_sxm", "gb300", "l40s",
                                 "rtx_pro_6000_server", "mi300x", "mi325x", "mi355x"])
def test_fp8_is_twice_bf16(gid):
    p = catalog()[gid].peak_flops_per_s
    # 2% slack: the L40S datasheet prints BF16 362.05 but FP8 733 (= 1,466 sparse / 2)
    assert p["fp8"] == pytest.approx(2 * p["bf16"], rel=0.02)


@pytest.mark.parametrize("gid", ["b200_sxm", "gb200", "rtx_pro_6000_server", "mi355x"])
def test_fp4_is_twice_fp8(gid):
    p = catalog()[gid].peak_flops_per_s
    assert p["fp4"] == pytest.approx(2 * p["fp8"], rel=0.01)


def test_fp6_rate_per_vendor():
    # NVIDIA Blackwell runs FP6 at the FP8 rate; CDNA4 runs MXFP6 at the FP4 rate (specs.md pitfall 5)
    for gid in NVIDIA_BLACKWELL:
        p = catalog()[gid].peak_flops_per_s
        assert p["fp6"] == pytest.approx(p["fp8"]), gid
    p = catalog()["mi355x"].peak_flops_per_s
    assert p["fp6"] == pytest.approx(p["fp4"])
    for gid in ["a100_sxm", "h100_sxm", "h200_sxm", "l40s", "mi300x"]:
        assert not catalog()[gid].supports("fp6")


def test_fp8_absent_on_ampere_and_int8_cut_on_blackwell_ultra():
    assert not catalog()["a100_sxm"].supports("fp8")
    for gid in ["b300_sxm", "gb300"]:
        p = catalog()[gid].peak_flops_per_s
        assert p["int8"] < 0.05 * p["fp8"]  # ~0.15 POPS vs 4.5-5 PF (specs.md pitfall 4)
    p = catalog()["b200_sxm"].peak_flops_per_s
    assert p["int8"] == pytest.approx(p["fp8"])


# ---------------------------------------------------------------- capacities and links


def test_capacity_is_what_the_framework_sees():
    c = catalog()
    assert c["h100_sxm"].hbm_bytes == 80 * GiB
    assert c["h200_sxm"].hbm_bytes == 141 * GiB
    assert c["b300_sxm"].hbm_bytes == 275_040 * MiB
    assert c["gb200"].hbm_bytes == 189_471 * MiB
    assert c["gb300"].hbm_bytes == 284_208 * MiB
    assert c["rtx_pro_6000_server"].hbm_bytes == 97_887 * MiB
    assert [c[g].hbm_bytes for g in ["mi300x", "mi325x", "mi355x"]] == [192e9, 256e9, 288e9]


def test_scaleup_bandwidth_is_one_direction_per_gpu():
    c = catalog()
    for gid in ["h100_sxm", "h200_sxm", "h20"]:
        assert c[gid].scaleup.bandwidth_bytes_per_s == 450e9  # NVLink4 "900 GB/s" is bidirectional
    for gid in ["b200_sxm", "b300_sxm", "gb200", "gb300"]:
        assert c[gid].scaleup.bandwidth_bytes_per_s == 900e9  # NVLink5 "1.8 TB/s" is bidirectional
    assert c["a100_sxm"].scaleup.bandwidth_bytes_per_s == 300e9
    assert c["l40s"].scaleup.bandwidth_bytes_per_s == 32e9  # PCIe Gen4 x16
    assert c["rtx_pro_6000_server"].scaleup.bandwidth_bytes_per_s == 64e9  # PCIe Gen5 x16


def test_topologies_and_domains():
    c = catalog()
    for gid in ["gb200", "gb300"]:
        assert (c[gid].scaleup.domain_gpus, c[gid].gpus_per_node, c[gid].scaleup.topology) == (72, 4, "switch")
    for gid in ["l40s", "rtx_pro_6000_server"]:
        assert (c[gid].scaleup.topology, c[gid].scaleup.domain_gpus) == ("pcie", 8)
    for gid in ["h100_sxm", "b200_sxm", "a100_sxm"]:
        assert (c[gid].scaleup.topology, c[gid].scaleup.domain_gpus) == ("switch", 8)


@pytest.mark.parametrize("gid,peer", [("mi300x", 64e9), ("mi325x", 64e9), ("mi355x", 76.8e9)])
def test_amd_infinity_fabric_is_a_mesh_of_seven_links(gid, peer):
    up = catalog()[gid].scaleup
    assert up.topology == "mesh" and up.domain_gpus == 8
    assert up.peer_bandwidth_bytes_per_s == pytest.approx(peer)
    assert up.bandwidth_bytes_per_s == pytest.approx(7 * peer)


def test_only_meshes_carry_a_peer_bandwidth():
    for hw in catalog().values():
        assert (hw.scaleup.peer_bandwidth_bytes_per_s is not None) == (hw.scaleup.topology == "mesh"), hw.id


def test_prices_are_derived_by_the_stated_rules():
    c = catalog()
    b200, gb200 = c["b200_sxm"].price_usd_per_hour, c["gb200"].price_usd_per_hour
    assert c["b300_sxm"].price_usd_per_hour == pytest.approx(1.2 * b200, abs=0.01)
    assert c["gb300"].price_usd_per_hour == pytest.approx(1.2 * gb200, abs=0.01)
    assert c["mi355x"].price_usd_per_hour == pytest.approx(b200 * 1.48 / 1.95, abs=0.01)


# ---------------------------------------------------------------- name resolution

SPELLINGS = {
    "h100_sxm": ["h100_sxm", "H100", "h100", "H100 80GB HBM3", "H100 SXM 80GB (DGX H100)", "NVIDIA H100 80GB HBM3"],
    "h200_sxm": ["h200_sxm", "H200", "H200 141GB HBM3", "h200 141gb hbm3e", "NVIDIA H200"],
    "b200_sxm": ["b200_sxm", "B200", "b200", "B200 180GB (DGX B200)", "NVIDIA B200"],
    "b300_sxm": ["b300_sxm", "B300", "HGX B300"],
    "gb200": ["gb200", "GB200", "GB200 NVL72", "gb200-nvl72"],
    "gb300": ["gb300", "GB300 NVL72"],
    "a100_sxm": ["a100_sxm", "A100", "A100 80GB", "A100-SXM4-80GB", "NVIDIA A100-SXM4-80GB"],
    "a100_sxm_40gb": ["a100_sxm_40gb", "A100 40GB", "A100-SXM4-40GB", "NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"],
    "h20": ["h20", "H20"],
    "h100_pcie": ["h100_pcie", "H100 PCIe", "NVIDIA H100 PCIe", "H100-PCIe-80GB", "NVIDIA H100-PCIe-80GB"],
    "h800_sxm": ["h800_sxm", "H800", "H800 SXM 80GB", "NVIDIA H800", "h800 80gb hbm3"],
    "l4": ["l4", "L4", "NVIDIA L4", "L4 24GB"],
    "l40s": ["l40s", "L40S", "NVIDIA L40S"],
    "rtx_pro_6000_server": ["rtx_pro_6000_server", "RTX PRO 6000", "RTX PRO 6000 Blackwell Server Edition"],
    "mi300x": ["mi300x", "MI300X", "AMD Instinct MI300X"],
    "mi325x": ["mi325x", "MI325X"],
    "mi355x": ["mi355x", "MI355X", "AMD Instinct MI355X"],
}


@pytest.mark.parametrize("gid,name", [(g, n) for g, names in SPELLINGS.items() for n in names])
def test_names_resolve_case_insensitively(gid, name):
    for variant in (name, name.upper(), name.lower()):
        assert get_hardware(variant).id == gid


def test_every_alias_resolves_to_its_own_gpu():
    # catches one alias claimed by two files (the index would silently keep the last)
    for hw in catalog().values():
        for alias in [hw.id, hw.name, *hw.aliases]:
            assert get_hardware(alias).id == hw.id, alias


def test_b200_and_gb200_are_not_confused():
    assert get_hardware("B200").id == "b200_sxm"
    assert get_hardware("GB200").id == "gb200"
    assert get_hardware("B300").id == "b300_sxm"
    assert get_hardware("GB300").id == "gb300"


def _calibration_names(file: str, column: str) -> set[str]:
    path = CALIBRATION_E2E / file
    if not path.exists():
        pytest.skip(f"{path} not available")
    with path.open(newline="") as f:
        return {row[column] for row in csv.DictReader(f) if row[column]}


@pytest.mark.parametrize("file,column", [("offline_throughput.csv", "gpu"), ("measured_serving.csv", "system")])
def test_calibration_gpu_names_resolve(file, column):
    names = _calibration_names(file, column)
    assert names
    ids = {get_hardware(n).id for n in names}
    assert ids <= {"h100_sxm", "b200_sxm"}, ids  # the calibration set covers H100 SXM and B200 only


# ---------------------------------------------------------------- GPU sets


@pytest.mark.parametrize("spec,count,gid,nodes", [
    ("8xB200", 8, "b200_sxm", 1),
    ("16xH200", 16, "h200_sxm", 2),
    ("72xGB200", 72, "gb200", 18),
    ("1xH100", 1, "h100_sxm", 1),
    ("8 x mi355x", 8, "mi355x", 1),
])
def test_parse_gpus(spec, count, gid, nodes):
    gs = parse_gpus(spec)
    assert (gs.count, gs.hardware.id, gs.nodes) == (count, gid, nodes)
    assert gs.label == f"{count}x{gid}"


@pytest.mark.parametrize("spec,must_mention", [
    ("0xB200", "at least 1"),
    ("banana", "COUNTxGPU"),
    ("8xBanana", "Banana"),
    ("", "COUNTxGPU"),
])
def test_bad_gpu_specs_give_a_one_line_error(spec, must_mention):
    with pytest.raises(SimfrontError) as err:
        parse_gpus(spec)
    msg = str(err.value)
    assert must_mention in msg and "\n" not in msg


def test_unknown_gpu_suggests_near_names():
    with pytest.raises(SimfrontError, match="did you mean"):
        get_hardware("H300")


def test_stated_capacity_must_match_the_part():
    """'H200 80GB' names no H200 (141 GB): reported, not silently swapped; 'A100 40GB' is the catalog's 40 GB part,
    not the 80 GB one."""
    with pytest.raises(SimfrontError, match="80 GB"):
        get_hardware("H200 80GB")
    assert get_hardware("A100 40GB").id == "a100_sxm_40gb"
    assert get_hardware("A100 80GB").id == "a100_sxm"
    assert get_hardware("MI300X 192GB").id == "mi300x"


def test_h800_is_h100_with_a_narrower_nvlink():
    """H800 SXM is H100 SXM's die with NVLink cut to 200 GB/s per direction: a TP8 step prices every compute and
    memory op as on H100 and only its NVLink collectives slower, by at most the ratio of the two parts' achievable
    bus bandwidths (the fixed latency is the same), so the step is slower."""
    from simfront import api

    h100, h800 = get_hardware("h100_sxm"), get_hardware("h800_sxm")
    assert h800.peak_flops_per_s == h100.peak_flops_per_s and h800.hbm_bandwidth_bytes_per_s == h100.hbm_bandwidth_bytes_per_s
    assert h800.scaleup.bandwidth_bytes_per_s == 200e9 < h100.scaleup.bandwidth_bytes_per_s
    a, b = (api.explain("llama-3.1-70b", f"8x{g}", tp=8, batch=32, ctx=4096) for g in ("H100", "H800"))
    comm = {r["op"] for r in a["ops"] if r["bound"] == "communication"}
    assert comm
    for ra, rb in zip(a["ops"], b["ops"]):
        assert ra["op"] == rb["op"]
        if ra["op"] in comm:
            ratio = (h100.achievable.collectives["nvswitch"].bus_bandwidth_bytes_per_s
                     / h800.achievable.collectives["nvswitch"].bus_bandwidth_bytes_per_s)
            assert ra["time_s"] < rb["time_s"] <= ra["time_s"] * ratio * (1 + 1e-9)
        else:
            assert rb["time_s"] == pytest.approx(ra["time_s"], rel=1e-12)
    assert b["step_time_s"] > a["step_time_s"]
