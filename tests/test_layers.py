"""Layers only point down: specs -> ops -> step -> serving -> deployment -> search -> planning / validation
-> api -> report / CLI. Parses every module's imports (module level and inside functions)."""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "simfront"

# layer of each module (a module may import its own layer or lower ones; a cycle inside a layer fails too)
LAYERS = {
    0: ["errors", "yamlio", "units", "precision", "hardware", "kernels", "architecture", "model_schema", "models", "params", "efficiency",
        "engines", "engine_rules", "speculative", "fusion", "scheduler", "engine_memory", "clients", "benchmark_run"],
    1: ["cost", "gemm", "moe", "attention", "mla", "linear_attention", "elementwise", "comm", "kernel_ops", "layout", "memory"],
    2: ["step", "sizing", "kernel_validate", "bounds", "priced"],
    3: ["serving", "agentic"],
    4: ["deployment"],
    5: ["search", "pareto", "uncertainty", "coverage", "results", "quality", "simulate", "step_table", "engine_loop",
        "engine_fast", "sim_metrics"],
    6: ["ingest", "measured", "calibration", "validation", "launch", "planning", "export", "inputs", "fidelity", "tails"],
    7: ["api"],
    8: ["format", "plot", "report", "report_fidelity", "cli", "__main__", "__init__"],
}
LEVEL = {m: lvl for lvl, mods in LAYERS.items() for m in mods}


def _module_of(path: Path) -> str:
    rel = path.relative_to(PKG).with_suffix("")
    return rel.parts[0]  # subpackages (ingest) are one unit


def _imports() -> list[tuple[str, str, bool, int]]:
    """(importer, imported, at module level, line) for every intra-package import."""
    out = []
    for f in sorted(PKG.rglob("*.py")):
        mod = _module_of(f)
        tree = ast.parse(f.read_text())
        top = {id(n) for n in tree.body}
        depth = len(f.relative_to(PKG).parts) - 1  # 1 inside a subpackage
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level:
                if node.level - 1 < depth:  # a sibling inside the same subpackage
                    continue
                targets = [node.module.split(".")[0]] if node.module else [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("simfront."):
                targets = [node.module.split(".")[1]]
            elif isinstance(node, ast.Import):
                targets = [a.name.split(".")[1] for a in node.names if a.name.startswith("simfront.")]
            else:
                continue
            for t in targets:
                if t != mod:
                    out.append((mod, t, id(node) in top, node.lineno))
    return out


def test_every_module_has_a_layer():
    mods = {_module_of(f) for f in PKG.rglob("*.py")}
    assert mods <= set(LEVEL), f"give these modules a layer in tests/test_layers.py: {sorted(mods - set(LEVEL))}"


def test_no_import_points_up():
    up = [f"{a} (layer {LEVEL[a]}) imports {b} (layer {LEVEL[b]}) at line {line}"
          for a, b, _, line in _imports() if b in LEVEL and a in LEVEL and LEVEL[b] > LEVEL[a]]
    assert not up, "\n".join(up)


def test_no_cycles_and_no_cycle_breaking_function_imports():
    """The module-level import graph is acyclic, and no function-level import would close a cycle
    if it were at module level (lazy imports are for start-up time, never to hide a cycle)."""
    edges: dict[str, set[str]] = {}
    lazy = []
    for a, b, top, line in _imports():
        if top:
            edges.setdefault(a, set()).add(b)
        else:
            lazy.append((a, b, line))

    def reaches(src: str, dst: str, extra: tuple[str, str] | None = None) -> bool:
        seen, stack = set(), [src]
        while stack:
            n = stack.pop()
            if n == dst:
                return True
            if n in seen:
                continue
            seen.add(n)
            nxt = set(edges.get(n, ()))
            if extra and n == extra[0]:
                nxt.add(extra[1])
            stack.extend(nxt)
        return False

    cycles = [f"{a} -> {b}" for a, bs in edges.items() for b in bs if reaches(b, a)]
    assert not cycles, f"module-level import cycles: {cycles}"
    breakers = [f"{a} -> {b} (line {line})" for a, b, line in lazy if reaches(b, a)]
    assert not breakers, f"function-level imports that hide a cycle: {breakers}"
