"""Quality as the frontier's third axis: the user's scores per weight format, KV dtype and speculative
method (simfront never invents a score).

``--quality nvfp4=0.97,fp8_block=1.0,kv:fp8=0.995`` or a YAML file of the same keys. A configuration's
score is the product of its weight-format score, its KV-dtype score (``kv:<dtype>``) and its
speculative method's score. Speculative decoding verifies every draft with the target model, so it is
lossless (1.0) unless the user scores it; every weight format and KV dtype the search uses needs a
score, else the search stops with an error naming it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from .errors import SimfrontError
from .pareto import pareto_mask
from .precision import FORMATS, KV_FORMATS, weights_of
from .search import DEFAULT_SPEC_K, parse_spec_label

LOSSLESS_SPEC = 1.0  # speculative decoding with target-model verification keeps the output distribution


def parse_quality(spec: str | dict | None) -> dict[str, float] | None:
    """``{key: score}`` from ``a=0.97,b=1.0``, a YAML file path, or a dict; scores in (0, 1]."""
    if spec is None:
        return None
    if isinstance(spec, dict):
        raw = dict(spec)
    elif Path(str(spec)).is_file():
        import yaml

        try:
            raw = yaml.safe_load(Path(str(spec)).read_text()) or {}
        except yaml.YAMLError as e:
            raise SimfrontError(f"--quality {spec}: not valid YAML ({str(e).splitlines()[0]})") from None
        if not isinstance(raw, dict):
            raise SimfrontError(f"--quality {spec}: expected a mapping such as 'nvfp4: 0.97'")
    else:
        raw = {}
        for part in str(spec).split(","):
            key, sep, val = part.partition("=")
            if not sep or not key.strip():
                raise SimfrontError(f"--quality {part!r}: expected KEY=SCORE such as nvfp4=0.97 (or a YAML file)")
            raw[key.strip()] = val.strip()
    out = {}
    for k, v in raw.items():
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise SimfrontError(f"--quality {k}={v!r}: the score must be a number in (0, 1]") from None
        if not (math.isfinite(f) and 0.0 < f <= 1.0):
            raise SimfrontError(f"--quality {k}={v!r}: the score must be a number in (0, 1]")
        out[str(k).strip().lower()] = f
    if not out:
        raise SimfrontError("--quality: no scores given")
    valid = quality_keys()
    unknown = [k for k in out if k not in valid]
    if unknown:
        raise SimfrontError(f"--quality {unknown[0]}: unknown key; valid: weight formats ({', '.join(FORMATS)}), KV dtypes "
                            f"({', '.join('kv:' + d for d in KV_FORMATS)}), speculative methods ({', '.join(SCORED_SPEC)})")
    return out


# speculative methods a score can name: those the search models (search.make_spec); "none" needs no score
SCORED_SPEC = tuple(DEFAULT_SPEC_K)


def quality_keys() -> set[str]:
    """Every key a quality score can name: a weight format, ``kv:<dtype>`` or a speculative method."""
    return set(FORMATS) | {f"kv:{d}" for d in KV_FORMATS} | set(SCORED_SPEC)


def point_scores(scores: dict[str, float], precision_labels, kv_dtypes, spec_labels) -> np.ndarray:
    """Score of every configuration: weight format x KV dtype x speculative method."""
    prec = np.asarray(precision_labels).astype(str)
    kv = np.asarray(kv_dtypes).astype(str)
    spec = np.asarray(spec_labels).astype(str)
    out = np.ones(prec.size)
    for name in np.unique(prec):
        w = weights_of(name)
        if w not in scores:
            raise SimfrontError(f"--quality gives no score for weight format {str(w)!r}; add {w}=SCORE (or restrict --precision)")
        out[prec == name] *= scores[w]
    for name in np.unique(kv):
        key = f"kv:{name}"
        if name in ("bf16", "fp16") and key not in scores:
            continue  # the 16-bit cache the model was trained with is the reference
        if key not in scores:
            raise SimfrontError(f"--quality gives no score for KV dtype {str(name)!r}; add {key}=SCORE (or restrict --kv-dtype)")
        out[kv == name] *= scores[key]
    for name in np.unique(spec):
        method = parse_spec_label(name)[0]
        out[spec == name] *= scores.get(method, LOSSLESS_SPEC) if method else 1.0
    return out


def pareto_mask_3d(x, y, q) -> np.ndarray:
    """True where no other point is at least as good on x, y and q (and strictly better on one)."""
    x, y, q = (np.asarray(a, float) for a in (x, y, q))
    keep = np.zeros(x.size, dtype=bool)
    for level in np.unique(q):  # a handful of distinct scores
        pool = np.nonzero(q >= level)[0]
        pool = pool[np.argsort(-q[pool], kind="stable")]  # of points tied in (x, y), the better-scored one survives
        on = pool[pareto_mask(x[pool], y[pool])]
        keep[on[q[on] == level]] = True
    return keep
