"""Speculative-decoding acceptance as data: acceptance length per draft length, per drafter family
(``models/speculative.yaml``, with sources), turned into the probability that the first ``i`` drafts
are all accepted. A model without its own family borrows its method's default family and says so."""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path


from . import yamlio
from .errors import SimfrontError

SPEC_FILE = Path(__file__).resolve().parent.parent / "models" / "speculative.yaml"


@lru_cache(maxsize=1)
def _data() -> dict:
    return yamlio.loads(SPEC_FILE.read_text()) or {}  # the C loader where PyYAML has it


def family_for(method: str, model_id: str | None) -> tuple[str | None, bool]:
    """(family name, borrowed) for a drafter method and model; (None, False) when the method has no table."""
    d = _data()
    for name, fam in (d.get("families") or {}).items():
        if fam.get("method") == method and model_id in (fam.get("models") or []):
            return name, False
    default = (d.get("method_default") or {}).get(method)
    return default, default is not None


def survival(family: str, k: int) -> tuple[float, ...]:
    """P(drafts 1..i all accepted) for i = 1..k, from the family's measured acceptance lengths."""
    fam = (_data().get("families") or {}).get(family)
    if fam is None:
        raise SimfrontError(f"unknown speculative family {family!r}; valid: {', '.join(_data().get('families') or {})}")
    al = {int(key): float(v) for key, v in fam["acceptance_lengths"].items()}
    al[0] = 1.0  # the verified (bonus) token alone
    ks = sorted(al)
    s = {i: al[i] - al[i - 1] for i in ks if i - 1 in al}  # s_i where consecutive lengths were measured
    out = []
    for i in range(1, k + 1):
        if i in s:
            out.append(s[i])
            continue
        lo = max(j for j in ks if j <= i)  # between measured lengths: the extra tokens spread evenly
        hi = min((j for j in ks if j > i), default=None)
        if hi is not None:
            out.append((al[hi] - al[lo]) / (hi - lo))
        else:  # beyond the table: geometric decay at the last measured ratio
            last = out[-1] if out else s[max(s)]
            prev = out[-2] if len(out) > 1 else 1.0
            out.append(last * min(last / prev, 1.0))
    return tuple(max(0.0, min(1.0, x)) for x in out)


def source(family: str) -> str:
    return str(((_data().get("families") or {}).get(family) or {}).get("source", ""))


def borrowed_note(labels, model_id: str) -> str | None:
    """A note for the speculative points (search labels such as ``eagle-k3@AL2.88``) whose acceptance lengths come
    from another model's family (``method_default``), naming the family and its source; None when every such point
    uses the model's own measured family or an acceptance the user gave (labels ``method-kK@0.7``)."""
    methods = sorted({str(lab).split("-k")[0] for lab in labels if "@AL" in str(lab)})
    lent = [(m, fam) for m in methods for fam, borrowed in [family_for(m, model_id)] if borrowed and fam]
    if not lent:
        return None
    said = "; ".join(f"{m} points take {fam}'s ({source(fam)})" for m, fam in lent)
    return (f"speculative decoding: {model_id} has no measured acceptance lengths of its own in models/speculative.yaml, "
            f"so {said}; give --acceptance to price your drafter's own rate")
