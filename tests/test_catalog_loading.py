"""Spec files load fast and lazily: the C YAML loader, and one hardware file parsed to resolve one name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from simfront import hardware, yamlio

ROOT = Path(__file__).resolve().parent.parent


def test_c_loader_reads_the_same_objects_as_the_python_loader():
    assert yamlio.SafeLoader is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    files = sorted((ROOT / "hardware").rglob("*.yaml")) + sorted((ROOT / "models").glob("*.yaml"))
    assert len(files) > 20
    for f in files:
        assert yamlio.load(f) == yaml.safe_load(f.read_text()), f


def test_header_index_matches_the_full_parse():
    """The id / name / aliases read from each file's own top-level lines are those of the whole document."""
    specs = [p for p in sorted(hardware.HARDWARE_DIR.glob("*.yaml")) if "peak_flops_per_s" in (yaml.safe_load(p.read_text()) or {})]
    heads = hardware._headers()
    assert sorted(heads) == sorted(yaml.safe_load(p.read_text())["id"] for p in specs)
    for p in specs:
        full = yaml.safe_load(p.read_text())
        path, head = heads[full["id"]]
        assert path == p and head == {k: full[k] for k in hardware.INDEX_KEYS if k in full}


def test_header_reader_handles_block_lists_and_rejects_non_specs(tmp_path):
    f = tmp_path / "x.yaml"
    f.write_text("# a comment\nid: x1\nname: X One\naliases:\n- x one\n-   'X-1 (DGX)'\nvendor: nvidia\npeak_flops_per_s:\n  bf16: 1.0e15\n")
    assert hardware._header(f) == {"id": "x1", "name": "X One", "aliases": ["x one", "X-1 (DGX)"]}
    g = tmp_path / "eff.yaml"
    g.write_text("families:\n  hopper: {a: 1}\n")
    assert hardware._header(g) is None


def test_one_name_parses_one_file():
    code = ("from simfront import hardware as h; h.parse_gpus('16xH200'); h.get_hardware('NVIDIA B200 180GB');"
            "print(h._load_spec.cache_info().currsize, len(h.catalog()))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert p.stdout.split() == ["2", str(len(hardware._headers()))]  # two names resolved, two files parsed


def test_catalog_mapping_still_holds_every_gpu():
    cat = hardware.catalog()
    assert set(cat) == set(hardware._headers()) and len(cat) == len(list(cat.values()))
    assert "h200_sxm" in cat and "banana" not in cat
    assert all(cat[g].id == g for g in cat)
