"""Spec files load fast and lazily: the C YAML loader, and one hardware file parsed to resolve one name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

from simfront import hardware, yamlio

ROOT = Path(__file__).resolve().parent.parent


def test_c_loader_reads_the_same_objects_as_the_python_loader():
    assert yamlio.loader() is getattr(yaml, "CSafeLoader", yaml.SafeLoader)
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


def _data_files() -> list[Path]:
    return (sorted((ROOT / "hardware").rglob("*.yaml")) + sorted((ROOT / "models").glob("*.yaml"))
            + sorted((ROOT / "simfront" / "engines").glob("*.yaml")))


def test_parse_cache_gives_the_parsed_document_on_a_miss_and_on_a_hit(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMFRONT_CACHE_DIR", str(tmp_path))
    files = _data_files()
    first = [yamlio.load(f) for f in files]  # misses: parsed and written
    entries = list((tmp_path / yamlio.CACHE_SUBDIR).iterdir())
    assert len(entries) == len({f.read_text() for f in files})  # one entry per distinct text, no temporary files left
    calls = []
    monkeypatch.setattr(yamlio, "parse", lambda text: calls.append(text))
    second = [yamlio.load(f) for f in files]  # hits: read back without parsing
    assert calls == []
    for f, a, b in zip(files, first, second):
        assert a == b == yaml.safe_load(f.read_text()), f


def test_parse_cache_never_serves_an_edited_file_its_old_document(tmp_path, monkeypatch):
    monkeypatch.setenv("SIMFRONT_CACHE_DIR", str(tmp_path / "cache"))
    f = tmp_path / "spec.yaml"
    f.write_text("a: 1\n")
    assert yamlio.load(f) == {"a": 1}
    f.write_text("a: 2\n")  # same size, maybe the same mtime: the key is the text
    assert yamlio.load(f) == {"a": 2}


def test_parse_cache_damaged_or_unwritable_or_off_still_parses(tmp_path, monkeypatch):
    text = "x: [1, 2.5, null, true, 'y']\n"
    want = {"x": [1, 2.5, None, True, "y"]}
    monkeypatch.setenv("SIMFRONT_CACHE_DIR", str(tmp_path / "c"))
    assert yamlio.loads(text) == want
    (entry,) = (tmp_path / "c" / yamlio.CACHE_SUBDIR).iterdir()
    entry.write_bytes(entry.read_bytes()[:3])  # a truncated entry
    assert yamlio.loads(text) == want
    assert yamlio.loads(text) == want  # rewritten by the reparse
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("SIMFRONT_CACHE_DIR", str(blocker / "under-a-file"))  # cannot be created
    assert yamlio.loads(text) == want
    monkeypatch.delenv("SIMFRONT_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(yamlio.os.path, "expanduser", lambda p: p)  # no home directory to be found
    assert yamlio.cache_dir() is None and yamlio.loads(text) == want
    monkeypatch.setenv("SIMFRONT_CACHE_DIR", str(tmp_path / "c"))
    monkeypatch.setenv("SIMFRONT_NO_CACHE", "1")
    assert yamlio.cache_dir() is None
    assert yamlio.loads("z: 3\n") == {"z": 3}


def test_parse_cache_skips_documents_marshal_cannot_hold(tmp_path, monkeypatch):
    import datetime as dt

    monkeypatch.setenv("SIMFRONT_CACHE_DIR", str(tmp_path))
    assert yamlio.loads("when: 2026-12-03\n") == {"when": dt.date(2026, 12, 3)}  # a YAML date: not cached
    assert not (tmp_path / yamlio.CACHE_SUBDIR).exists() or not any((tmp_path / yamlio.CACHE_SUBDIR).iterdir())


def test_predict_imports_no_yaml_parser_once_its_documents_are_cached(tmp_path):
    """A warm cache spares the PyYAML import: the command reads only cached documents."""
    code = ("import sys, simfront.api as a; a.predict('deepseek-r1', '8xH200', isl=1024, osl=1024);"
            "print('yaml' in sys.modules)")
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin", "SIMFRONT_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env)
            for _ in range(2)]
    assert [r.stdout.split()[-1] for r in runs] == ["True", "False"]
