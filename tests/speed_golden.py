"""Golden check for speed work: record what searches return, then compare after a change.

    PYTHONPATH=$PWD python tests/speed_golden.py record /tmp/golden.pkl
    PYTHONPATH=$PWD python tests/speed_golden.py compare /tmp/golden.pkl

Records, for several searches (dense / MoE / MLA, agg + disagg, MTP and EAGLE, 1-576 GPUs, SLA and
load constraints, plan over the default GPU types): every field of every frontier point, the knee,
the best point under the SLA, n_configs_evaluated, n_feasible, and for the smaller searches every
column of every feasible configuration (as a multiset of rows, so the order may change). Compare
passes when all agree to a relative 1e-9 (floats) and exactly (everything else).

Not a pytest test: the golden file is of this commit's model; a change of the cost model changes it.
"""

from __future__ import annotations

import math
import pickle
import sys

import numpy as np

REL = 1e-9

PREDICTS = {  # name -> (model, gpus, kwargs)
    "r1_16xH200_8k1k": ("deepseek-r1", "16xH200", dict(isl=8192, osl=1024)),
    "r1_576xGB200_8k1k": ("deepseek-r1", "576xGB200", dict(isl=8192, osl=1024)),
    "r1_8xB200_sla": ("deepseek-r1", "8xB200", dict(isl=1024, osl=1024, ttft_ms=2000, tpot_ms=30)),
    "llama70b_8xH100": ("llama-3.3-70b", "8xH100", dict(isl=2048, osl=256, min_tok_s_user=20)),
    "llama8b_1xH100": ("llama-3.1-8b", "1xH100", dict(isl=1024, osl=1024)),
    "qwen3moe_8xB200_eagle": ("qwen3-235b-a22b", "8xB200", dict(isl=4096, osl=512, spec="eagle", concurrency=64)),
    "r1_72xGB200_rate": ("deepseek-r1", "72xGB200", dict(isl=1024, osl=1024, rate=50)),
    "gptoss_4xMI355X": ("gpt-oss-120b", "4xMI355X", dict(isl=1024, osl=2048, modes=["agg"])),
    # linear attention (KDA, GDN), sliding windows with a prefix-cache hit rate, a token budget given
    "kimik3_16xB300": ("kimi-k3", "16xB300", dict(isl=4096, osl=1024)),
    "qwen3next_8xB200": ("qwen3-next-80b-a3b", "8xB200", dict(isl=2048, osl=2048)),
    "gemma3_4xH100_prefix": ("gemma-3-27b", "4xH100", dict(isl=8192, osl=512, prefix_hit=0.5)),
    "glm53_8xB200_chunk": ("glm-5.3", "8xB200", dict(isl=1024, osl=1024, chunk_tokens=4096)),
}
FULL_POINTS = {"r1_16xH200_8k1k", "r1_8xB200_sla", "llama70b_8xH100", "llama8b_1xH100", "qwen3moe_8xB200_eagle", "gptoss_4xMI355X",
               "kimik3_16xB300", "qwen3next_8xB200", "gemma3_4xH100_prefix", "glm53_8xB200_chunk"}
PLANS = {
    "plan_r1_20rps": ("deepseek-r1", 20, dict(isl=8192, osl=1024, ttft_ms=2000, tpot_ms=30)),
    "plan_llama70b_5rps": ("llama-3.3-70b", 5, dict(isl=1024, osl=1024, tpot_ms=50)),
}


def _rows(pts: dict) -> dict:
    """Columns sorted as a multiset of rows (lexicographic over every column)."""
    keys = sorted(pts)
    cols = [np.asarray(pts[k]) for k in keys]
    sortable = [np.unique(c.astype(str), return_inverse=True)[1] if c.dtype == object else c for c in cols]
    order = np.lexsort(sortable[::-1])
    return {k: c[order] for k, c in zip(keys, cols)}


def run() -> dict:
    from simfront import api

    out = {}
    for name, (model, gpus, kw) in PREDICTS.items():
        r = api.predict(model, gpus, **kw)
        d = r.model_dump() if hasattr(r, "model_dump") else dict(r)
        d.pop("search_time_s", None)
        rec = {"frontier": d["frontier"], "knee": d["knee"], "best_under_sla": d["best_under_sla"],
               "n_configs_evaluated": d["n_configs_evaluated"], "n_feasible": d["n_feasible"], "notes": d["notes"]}
        if name in FULL_POINTS:
            rec["points"] = _rows(dict(r.points))
        out[name] = rec
        print(f"{name}: {d['n_configs_evaluated']} evaluated, {d['n_feasible']} feasible, {len(d['frontier'])} on the frontier",
              file=sys.stderr)
    for name, (model, rate, kw) in PLANS.items():
        p = api.plan(model, rate, **kw)
        d = p.model_dump() if hasattr(p, "model_dump") else dict(p)
        d.pop("search_time_s", None)
        out[name] = d
        print(f"{name}: {len(d['rows'])} rows", file=sys.stderr)
    return out


def diff(a, b, path="") -> list[str]:
    """Differences between two recorded values (floats to a relative REL)."""
    if isinstance(a, dict) and isinstance(b, dict):
        probs = [f"{path}: keys {sorted(set(a) ^ set(b))}"] if set(a) != set(b) else []
        for k in a:
            if k in b:
                probs += diff(a[k], b[k], f"{path}.{k}")
        return probs
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [p for i, (x, y) in enumerate(zip(a, b)) for p in diff(x, y, f"{path}[{i}]")]
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.shape != b.shape:
            return [f"{path}: shape {a.shape} != {b.shape}"]
        if a.dtype == object or b.dtype == object or a.dtype.kind in "US" or b.dtype.kind in "US":
            bad = a.astype(str) != b.astype(str)
        else:
            af, bf = a.astype(float), b.astype(float)
            same = (af == bf) | (np.isnan(af) & np.isnan(bf)) | (np.abs(af - bf) <= REL * np.maximum(np.abs(af), np.abs(bf)))
            bad = ~same
        n = int(np.count_nonzero(bad))
        return [f"{path}: {n} of {a.size} differ (first at {int(np.nonzero(bad.ravel())[0][0])})"] if n else []
    if isinstance(a, float) and isinstance(b, float):
        if (math.isnan(a) and math.isnan(b)) or a == b or abs(a - b) <= REL * max(abs(a), abs(b)):
            return []
        return [f"{path}: {a!r} != {b!r}"]
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return diff(float(a), float(b), path)
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("record", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    got = run()
    if argv[0] == "record":
        with open(argv[1], "wb") as f:
            pickle.dump(got, f)
        print(f"recorded {len(got)} cases in {argv[1]}")
        return 0
    with open(argv[1], "rb") as f:
        want = pickle.load(f)
    probs = diff(want, got)
    for p in probs[:40]:
        print("DIFF", p)
    print(f"{'IDENTICAL' if not probs else 'DIFFERENT'}: {len(got)} cases, {len(probs)} differences")
    return 1 if probs else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
