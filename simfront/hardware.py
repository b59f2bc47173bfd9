"""Accelerator specs: the schema, the catalog in ``hardware/*.yaml``, name resolution, GPU sets.

Every figure lives in a data file with its source; nothing here is a spec constant.
All quantities are SI: FLOP/s, bytes, bytes/s, watts, US dollars per GPU-hour.
"""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path
from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from . import yamlio
from .errors import SimfrontError, unknown

HARDWARE_DIR = Path(__file__).resolve().parent.parent / "hardware"

Family = Literal["ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4"]
ComputeDtype = Literal["fp32", "tf32", "bf16", "fp8", "int8", "fp6", "fp4"]
# Tensor-core dtypes a GEMM runs at (precision.gemm_rate_dtype): each needs an achievable-peak entry
MATMUL_DTYPES = ("bf16", "fp8", "fp4", "int8")
# Kinds of link a collective runs over: NVLink through NVSwitch, AMD's xGMI point-to-point mesh, PCIe
# peer-to-peer through a PCIe switch, PCIe routed through the host CPU (no P2P path), scale-out NIC
LinkKind = Literal["nvswitch", "xgmi_mesh", "pcie_switch", "pcie_host", "nic"]


class ScaleUp(BaseModel):
    """The scale-up domain (NVLink / Infinity Fabric / PCIe) a GPU sits in."""

    model_config = ConfigDict(extra="forbid")
    link: str  # e.g. "NVLink5", "Infinity Fabric (xGMI)", "PCIe Gen5 x16"
    domain_gpus: int  # GPUs that reach each other at the scale-up bandwidth (8 on HGX, 72 on NVL72)
    bandwidth_bytes_per_s: float  # per GPU, ONE direction (NVLink "900 GB/s" bidi -> 450e9)
    topology: Literal["switch", "mesh", "pcie"]  # mesh: one link per peer pair (AMD), switch: full bandwidth to any peer
    peer_bandwidth_bytes_per_s: float | None = None  # one direction, GPU pair, for meshes (MI300X: 64e9)


class _Provenance(BaseModel):
    """Where an achievable figure comes from: a public ``source``, or ``estimate: true`` with ``reasoning``."""

    model_config = ConfigDict(extra="forbid")
    source: str | None = None
    estimate: bool = False
    reasoning: str | None = None  # how an estimate was derived (clocks, family, a measured sibling)

    @model_validator(mode="after")
    def _sourced_or_estimated(self):
        if not self.estimate and not self.source:
            raise ValueError("an achievable figure needs a source, or estimate: true with its reasoning")
        if self.estimate and not self.reasoning:
            raise ValueError("an estimated achievable figure needs its reasoning")
        return self


class AchievedValue(_Provenance):
    """One achievable figure: the most a tuned kernel sustains on real silicon (not the datasheet)."""

    value: float = Field(gt=0)


class CollectivePeak(_Provenance):
    """What NCCL/RCCL sustain over one kind of link, as nccl-tests / rccl-tests report it."""

    # all-reduce bus bandwidth at the largest message (busbw = algbw x 2(n-1)/n), per GPU, bytes/s
    bus_bandwidth_bytes_per_s: float = Field(gt=0)
    # time of a small (8 KiB) all-reduce across the group: the latency floor of the collective, seconds
    latency_s: float = Field(gt=0)


class Achievable(BaseModel):
    """Achievable peaks: maximum sustained matmul rate per dtype, HBM bandwidth, collectives per link kind.

    Efficiency parameters of the GEMM and collective models are fractions of these, so a value fitted
    on one GPU transfers to another through its achievable peaks rather than its datasheet.
    """

    model_config = ConfigDict(extra="forbid")
    # dense GEMM, large well-shaped problems, per tensor-core dtype; "fp8_block" (optional) is the
    # block-scaled FP8 kernel (128x128 weight scales), whose k-loop pays scale loads and promotion
    matmul_flops_per_s: dict[Literal[ComputeDtype, "fp8_block"], AchievedValue]
    hbm_bandwidth_bytes_per_s: AchievedValue  # streaming copy / coalesced load rate
    scaleup_link_kind: LinkKind  # which entry of ``collectives`` the scale-up domain uses
    collectives: dict[LinkKind, CollectivePeak]  # must hold scaleup_link_kind and "nic"

    @model_validator(mode="after")
    def _has_used_links(self):
        for kind in (self.scaleup_link_kind, "nic"):
            if kind not in self.collectives:
                raise ValueError(f"achievable.collectives lacks {kind!r} (scale-up link kind and the scale-out NIC)")
        return self


class Hardware(BaseModel):
    """One accelerator as the cost model sees it."""

    model_config = ConfigDict(extra="forbid")
    id: str  # canonical id, e.g. "h100_sxm"
    name: str  # display name, e.g. "H100 SXM 80GB"
    vendor: Literal["nvidia", "amd"]
    family: Family  # efficiency parameters are per family, not per GPU
    aliases: list[str] = Field(default_factory=list)
    sm_count: int  # SMs (NVIDIA) or CUs (AMD): the unit of wave quantization
    # NVIDIA compute capability ("9.0", "10.0"): which architecture-specific kernels the engines ship
    # for the part (e.g. the fused FP4 MoE kernel is built for 10.0 / 10.3 only); None on AMD
    compute_capability: str | None = None
    # AMD LLVM processor ("gfx942" CDNA3, "gfx950" CDNA4): which ROCm kernels (aiter, hipBLASLt, CK) ship
    # for the part; None on NVIDIA. Kernel availability per platform: hardware/kernels.yaml
    gfx_target: str | None = None
    peak_flops_per_s: dict[ComputeDtype, float]  # DENSE peaks; absent key = not supported
    fp4_formats: list[Literal["nvfp4", "mxfp4"]] = Field(default_factory=list)  # 4-bit formats with tensor-core support
    hbm_bytes: float  # capacity the framework sees (GiB-based for NVIDIA "80 GB" parts)
    hbm_bandwidth_bytes_per_s: float  # datasheet peak
    l2_bytes: float | None = None
    scaleup: ScaleUp
    gpus_per_node: int  # GPUs per host / tray (GB200: 4); scale-up may span nodes (NVL72)
    scaleout_bandwidth_bytes_per_s: float  # NIC per GPU, one direction (400 Gb/s CX-7 -> 50e9)
    power_w: float
    # measured (or estimated, and marked so) achievable peaks; see :class:`Achievable`
    achievable: Achievable | None = None
    # tensor-core rate a format runs at where it differs from precision.FORMATS (e.g. MI355X: MXFP4
    # MFMA at the FP4 rate, where NVIDIA runs MXFP4 MoE as W4A8 at the FP8 rate)
    format_rates: dict[str, ComputeDtype] = Field(default_factory=dict)
    price_usd_per_hour: float  # default on-demand price per GPU-hour; overridable with --price
    sources: dict[str, str]  # field -> citation

    def supports(self, dtype: str) -> bool:
        return dtype in self.peak_flops_per_s and self.peak_flops_per_s[dtype] > 0

    def achievable_matmul_flops_per_s(self, dtype: str) -> float:
        """Maximum sustained dense GEMM rate in ``dtype`` (``fp8_block``: block-scaled FP8, falling back
        to ``fp8``); the datasheet peak times ``UNLISTED_ACHIEVABLE_FRACTION`` where the spec has no entry."""
        a = self.achievable
        if a is not None and dtype in a.matmul_flops_per_s:
            return a.matmul_flops_per_s[dtype].value
        if dtype == "fp8_block":
            return self.achievable_matmul_flops_per_s("fp8")
        return self.peak_flops_per_s[dtype] * UNLISTED_ACHIEVABLE_FRACTION

    @property
    def achievable_hbm_bytes_per_s(self) -> float:
        a = self.achievable
        return a.hbm_bandwidth_bytes_per_s.value if a is not None else self.hbm_bandwidth_bytes_per_s * UNLISTED_ACHIEVABLE_FRACTION

    def collective_peak(self, scope: str = "scaleup") -> CollectivePeak:
        """Achievable collective bus bandwidth and latency of the scale-up link (``scope='scaleup'``) or the NIC."""
        a = self.achievable
        if a is not None:
            return a.collectives[a.scaleup_link_kind if scope == "scaleup" else "nic"]
        bw = self.scaleup.bandwidth_bytes_per_s if scope == "scaleup" else self.scaleout_bandwidth_bytes_per_s
        return CollectivePeak(bus_bandwidth_bytes_per_s=bw * UNLISTED_ACHIEVABLE_FRACTION, latency_s=UNLISTED_COLLECTIVE_LATENCY_S,
                              estimate=True, reasoning="no achievable entry in the hardware spec: datasheet share")

    def estimated_peaks(self) -> list[str]:
        """Names of the achievable figures that are estimates rather than published measurements."""
        a = self.achievable
        if a is None:
            return ["all achievable peaks (no achievable entry: datasheet x UNLISTED_ACHIEVABLE_FRACTION)"]
        out = [f"matmul_flops_per_s.{d}" for d, v in a.matmul_flops_per_s.items() if v.estimate]
        if a.hbm_bandwidth_bytes_per_s.estimate:
            out.append("hbm_bandwidth_bytes_per_s")
        used = (a.scaleup_link_kind, "nic")  # the link kinds predictions on this GPU use
        out += [f"collectives.{k}" for k in used if a.collectives[k].estimate]
        return out


# Share of a datasheet figure taken as achievable when a spec carries no achievable entry: the median
# achievable/datasheet ratio of the catalog's measured entries (GEMM 0.70-0.86, HBM 0.89-0.90, links 0.7-1.0).
UNLISTED_ACHIEVABLE_FRACTION = 0.8
# Small-message collective latency taken when a spec carries none: the 8 KiB all-reduce on 8xH100 (specs.md A.3)
UNLISTED_COLLECTIVE_LATENCY_S = 16e-6


# Top-level keys read from every spec file to resolve a name without parsing the whole file
INDEX_KEYS = ("id", "name", "aliases")
SPEC_MARKER_KEY = "peak_flops_per_s"  # a top-level key only hardware specs have (not efficiency files)


def _header(path: Path) -> dict | None:
    """``id``, ``name`` and ``aliases`` of one spec file, parsed from their own top-level blocks only.

    A top-level block starts at a line whose first character begins a key (not indentation, a comment,
    or a ``-`` sequence item) and runs to the next one. None when the file is not a hardware spec."""
    keep: list[str] = []
    top_keys: set[str] = set()
    wanted = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line[:1] not in ("", " ", "\t", "#", "-"):
            key = line.split(":", 1)[0].strip()
            top_keys.add(key)
            wanted = key in INDEX_KEYS
        if wanted:
            keep.append(line)
    if SPEC_MARKER_KEY not in top_keys:
        return None
    head = yamlio.loads("\n".join(keep)) or {}
    return head if isinstance(head, dict) else None


@lru_cache(maxsize=None)
def _headers() -> dict[str, tuple[Path, dict]]:
    """Canonical id -> (spec file, its header), for every hardware spec in ``hardware/*.yaml``."""
    out: dict[str, tuple[Path, dict]] = {}
    for path in sorted(HARDWARE_DIR.glob("*.yaml")):
        head = _header(path)
        if head is None:
            continue  # not a hardware spec (e.g. efficiency parameters)
        gid = head.get("id")
        if not isinstance(gid, str) or not gid:
            raise SimfrontError(f"{path}: a hardware spec needs a top-level 'id'")
        if gid in out:
            raise SimfrontError(f"{path}: id {gid!r} is also the id of {out[gid][0]}")
        out[gid] = (path, head)
    return out


@lru_cache(maxsize=None)
def _load_spec(gid: str) -> Hardware:
    """One accelerator, parsed and validated from its own file only."""
    path = _headers()[gid][0]
    hw = Hardware(**yamlio.load(path))
    if hw.id != gid:
        raise SimfrontError(f"{path}: id {hw.id!r} differs from the id its header was indexed under, {gid!r}")
    return hw


class _Catalog(Mapping):
    """Canonical id -> :class:`Hardware`; a spec file is parsed the first time its GPU is looked up."""

    def __getitem__(self, gid: str) -> Hardware:
        if gid not in _headers():
            raise KeyError(gid)
        return _load_spec(gid)

    def __iter__(self):
        return iter(_headers())

    def __len__(self) -> int:
        return len(_headers())

    def __contains__(self, gid) -> bool:
        return gid in _headers()


@lru_cache(maxsize=None)
def catalog() -> Mapping[str, Hardware]:
    """All accelerators in ``hardware/*.yaml``, keyed by canonical id (each file parsed on first use)."""
    return _Catalog()


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-()]+", " ", name.strip().lower()).strip()


@lru_cache(maxsize=None)
def _alias_index() -> dict[str, str]:
    """Normalised id, display name and aliases -> canonical id, from the files' headers."""
    idx: dict[str, str] = {}
    for gid, (_, head) in _headers().items():
        for a in [gid, head.get("name") or "", *(head.get("aliases") or [])]:
            if a:
                idx[_norm(str(a))] = gid
    return idx


def get_hardware(name: str) -> Hardware:
    """Resolve a GPU name case-insensitively: ids, display names, aliases, benchmark-log spellings."""
    if isinstance(name, Hardware):
        return name
    idx = _alias_index()
    key = _norm(name)
    if key in idx:
        return catalog()[idx[key]]
    # Benchmark logs add vendor, capacity and system words ("NVIDIA H200 141GB HBM3", "B200 180GB (DGX B200)"):
    # drop those and retry. Words that name a different part (pcie, nvl, 40gb, 3e) are kept, so an
    # unknown variant is reported instead of silently becoming its sibling.
    stripped = re.sub(r"\b(nvidia|amd|instinct|\d+\s*gi?b|hbm\d?e?|dgx|hgx|sxm\d?|server|edition)\b", " ", key)
    stripped = " ".join(stripped.split())
    words = stripped.split(" ")
    if stripped not in idx and len(words) == 2 and words[0] == words[1]:  # "b200 (dgx b200)"
        stripped = words[0]
    if stripped in idx:
        hw = catalog()[idx[stripped]]
        cap = re.search(r"\b(\d+)\s*gi?b\b", key)
        if cap and not _capacity_matches(float(cap.group(1)), hw):
            # "A100 40GB" is not the 80 GB part: a stated capacity that disagrees names another SKU
            raise SimfrontError(f"unknown GPU {name!r}: the catalog's {hw.id} has {hw.hbm_bytes / 2**30:.0f} GiB, "
                                f"not {cap.group(1)} GB; add a hardware/*.yaml for that part")
        return hw
    raise unknown("GPU", name, list(catalog()))


# A stated memory size names the same part when it is within this share of the catalog capacity,
# read as GB or GiB (vendors and nvidia-smi round differently: "80GB" = 80 GiB, "192GB" = 192e9 B).
CAPACITY_MATCH_TOLERANCE = 0.10


def _capacity_matches(stated_gb: float, hw: Hardware) -> bool:
    return any(abs(stated_gb / c - 1.0) <= CAPACITY_MATCH_TOLERANCE for c in (hw.hbm_bytes / 1e9, hw.hbm_bytes / 2**30))


class GpuSet(BaseModel):
    """``count`` GPUs of one type, e.g. ``8xB200`` or ``72xGB200``."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)
    count: int
    hardware: Hardware

    @property
    def label(self) -> str:
        return f"{self.count}x{self.hardware.id}"

    @property
    def nodes(self) -> int:
        return -(-self.count // self.hardware.gpus_per_node)


# Largest GPU set simfront searches: 2048 GPUs, four times the largest deployment the planner and
# the fewest-GPUs search consider (planning.DEFAULT_MAX_GPUS, sizing.CANDIDATE_COUNTS: 512). The
# disaggregated search matches worker counts over the whole set, so its time grows with the count
# (DeepSeek-R1 on 2304xGB200: about 10 s on one core); a million GPUs would run for many minutes.
MAX_GPU_COUNT = 2048

_GPUS_RE = re.compile(r"^\s*(-?\d+)\s*[x×*]\s*(.+?)\s*$", re.I)


def parse_gpus(spec: str) -> GpuSet:
    """Parse ``NxGPU`` (``8xB200``, ``16xH200``, ``72xGB200``, ``1xH100``)."""
    m = _GPUS_RE.match(spec or "")
    if not m:
        raise SimfrontError(f"cannot read --gpus {spec!r}; expected COUNTxGPU such as 8xB200 or 16xH200")
    count = int(m.group(1))
    if count < 1:
        raise SimfrontError(f"--gpus {spec!r}: the GPU count must be at least 1")
    if count > MAX_GPU_COUNT:
        raise SimfrontError(f"--gpus {spec!r}: {count:,} GPUs is above the largest set simfront searches, {MAX_GPU_COUNT:,} "
                            f"(four times the planner's largest deployment)")
    return GpuSet(count=count, hardware=get_hardware(m.group(2)))
