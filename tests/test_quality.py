"""Quality as the third axis of the frontier (user scores only) and speculative acceptance as data."""

from __future__ import annotations

import numpy as np
import pytest

from simfront import api
from simfront.errors import SimfrontError
from simfront.quality import parse_quality, pareto_mask_3d
from simfront.search import make_spec
from simfront.models import get_model
from simfront.speculative import family_for, survival

SCORES = "nvfp4=0.97,fp8_block=1.0,kv:fp8=0.995"


def test_no_frontier_point_is_dominated_on_all_three_axes():
    res = api.predict("deepseek-r1", "8xB200", modes=["agg"], quality=SCORES)
    f = res.frontier
    x = np.array([p.tok_s_user for p in f])
    y = np.array([p.tok_s_gpu for p in f])
    q = np.array([p.quality for p in f])
    assert len({float(v) for v in q}) >= 2  # the scores shape the frontier
    for i in range(len(f)):
        dom = (x >= x[i]) & (y >= y[i]) & (q >= q[i]) & ((x > x[i]) | (y > y[i]) | (q > q[i]))
        assert not dom.any(), f[i].layout
    # every point outside the frontier is dominated by one inside it or by another point
    pts = res.points
    assert pts["quality"].size == pts["tok_s_gpu"].size


def test_pareto_3d_keeps_a_slower_but_better_point():
    x = np.array([1.0, 1.0, 2.0])
    y = np.array([1.0, 1.0, 0.5])
    q = np.array([0.9, 1.0, 0.9])
    assert list(pareto_mask_3d(x, y, q)) == [False, True, True]  # the tie goes to the better score


def test_compare_names_the_trade():
    r = api.frontier_compare("deepseek-r1", "8xB200", "precision", ["fp8_block", "nvfp4"], quality=SCORES)
    v = r["verdicts"][0]
    assert v["quality_trade"]["quality_change_pts"] < 0
    assert "quality" in v["verdict"] and "per point" in v["verdict"]


@pytest.mark.parametrize("bad", ["nvfp4", "nvfp4=1.5", "nvfp4=0", "nvfp4=x", "=0.9"])
def test_bad_quality_is_one_line_error(bad):
    with pytest.raises(SimfrontError) as e:
        parse_quality(bad)
    assert "\n" not in str(e.value)


def test_unscored_format_is_an_error_not_an_invented_score():
    with pytest.raises(SimfrontError, match="no score for weight format '"):
        api.predict("llama-3.1-8b", "1xB200", modes=["agg"], quality="nvfp4=0.97")
    with pytest.raises(SimfrontError) as e:  # the KV dtype's name, not numpy's repr of it
        api.predict("llama-3.1-8b", "1xB200", modes=["agg"], quality="bf16=1,fp8_block=1,fp8=1,nvfp4=0.97,mxfp4=0.97")
    assert "no score for KV dtype 'fp8'" in str(e.value) and "np." not in str(e.value)


def test_a_key_that_scores_nothing_is_an_error_not_dropped():
    with pytest.raises(SimfrontError, match="--quality nvfp44: unknown key"):
        parse_quality("nvfp4=0.97,nvfp44=0.9")
    assert parse_quality("nvfp4=0.97,kv:fp8=0.99,mtp=1") == {"nvfp4": 0.97, "kv:fp8": 0.99, "mtp": 1.0}


def test_acceptance_table_peaks_gain_near_three_drafts_for_deepseek_mtp():
    m = get_model("deepseek-r1")
    al = [make_spec("mtp", k, None, m).accepted_per_step for k in (1, 2, 3, 4)]
    assert al == pytest.approx([1.79, 2.27, 2.49, 2.54])
    gains = np.diff([1.0] + al)
    assert gains[3] < 0.1 * gains[0]  # the fourth draft adds almost nothing (measured)
    assert family_for("mtp", "minimax-m2.5") == ("deepseek-mtp", True)
    s = survival("glm-mtp", 6)
    assert all(0 < a <= 1 for a in s) and all(s[i + 1] <= s[i] + 1e-12 for i in range(5))
    assert make_spec("mtp", 2, 0.8, m).accepted_per_step == pytest.approx(1 + 0.8 + 0.8 * 0.8 * 0.85)


def test_search_offers_mtp_up_to_four_drafts():
    res = api.predict("deepseek-r1", "8xB200", modes=["agg"])
    ks = {int(s.split("-k")[1].split("@")[0]) for s in res.points["spec"] if s != "none"}
    assert ks == {1, 2, 3, 4}


def _drafts(res) -> dict[str, set[int]]:
    out: dict[str, set[int]] = {}
    for s in set(res.points["spec"]):
        if s != "none":
            method, k = s.split("-k")[0], int(s.split("-k")[1].split("@")[0])
            out.setdefault(method, set()).add(k)
    return out


def test_a_named_method_searches_the_same_draft_lengths_as_the_default_and_spec_k_pins_one():
    # --spec mtp (or eagle) without --spec-k searches 1-4 drafts, as the default search does for the MTP a model
    # ships: naming the method must never narrow the search to one draft length and a worse frontier
    kw = dict(isl=1024, osl=1024, modes=["agg"])
    default = api.predict("deepseek-r1", "8xB200", **kw)
    named = api.predict("deepseek-r1", "8xB200", spec="none,mtp", **kw)
    assert _drafts(named) == _drafts(default) == {"mtp": {1, 2, 3, 4}}
    assert [(p.layout, p.spec, p.tok_s_gpu) for p in named.frontier] == [(p.layout, p.spec, p.tok_s_gpu) for p in default.frontier]
    assert _drafts(api.predict("qwen3-235b-a22b", "8xB200", spec="eagle", **kw)) == {"eagle": {1, 2, 3, 4}}
    assert _drafts(api.predict("deepseek-r1", "8xB200", spec="mtp", spec_k=2, **kw)) == {"mtp": {2}}
    assert set(api.predict("deepseek-r1", "8xB200", spec="none", **kw).points["spec"]) == {"none"}


def test_spec_labels_parse_back_to_the_same_speculation():
    from simfront.search import parse_spec_label, spec_from_label, spec_label

    m = get_model("deepseek-r1")
    for label in ("none", "mtp-k1@AL1.79", "mtp-k3@AL2.49", "ngram-k3@0.3"):
        assert spec_label(spec_from_label(label, m)) == label
    assert parse_spec_label("eagle-k3@0.7") == ("eagle", 3, 0.7)


def test_a_model_without_its_own_acceptance_table_says_whose_it_borrows():
    """models/speculative.yaml: an unlisted model's drafts take its method's default family; predict says so (naming
    the family and its source) when such points reach the frontier, and not for a listed model or a user's --acceptance."""
    from simfront.speculative import borrowed_note, family_for

    assert family_for("eagle", "llama-3.1-8b") == ("kimi-eagle3", True)
    assert family_for("mtp", "deepseek-r1") == ("deepseek-mtp", False)
    kw = dict(isl=1024, osl=1024, modes=["agg"])
    notes = api.predict("llama-3.1-8b", "1xH100", spec="none,eagle", **kw)["notes"]
    said = [n for n in notes if n.startswith("speculative decoding: llama-3.1-8b has no measured acceptance lengths")]
    assert len(said) == 1 and "eagle points take kimi-eagle3's (InferenceX golden AL" in said[0]
    assert not any("acceptance lengths of its own" in n for n in api.predict("deepseek-r1", "8xB200", **kw)["notes"])
    own = api.predict("llama-3.1-8b", "1xH100", spec="eagle", acceptance=0.7, **kw)["notes"]
    assert not any("acceptance lengths of its own" in n for n in own)
    assert borrowed_note(["none", "eagle-k3@0.7"], "llama-3.1-8b") is None
    assert "mtp points take deepseek-mtp's" in borrowed_note(["mtp-k2@AL2.27"], "minimax-m2.5")
