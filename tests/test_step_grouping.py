"""The step's fast paths (issue 16, speed part 2) give exactly what the plain computations give.

* ops costed once per group of layouts with equal inputs (``step.LayoutRows``) vs every op over every layout;
* the op sums on the finest layout grouping (``StepCost.sums``) vs the per-op sums over every layout;
* the op memo shared by a search's precisions vs no memo;
* every speculation and token budget in one step call (``serving.worker_raw``) vs one call per step;
* pairs whose two workers exceed the GPU set get no worker counts (what ``search._disagg`` skips).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simfront import step as step_mod
from simfront.cost import _FIELDS
from simfront.hardware import get_hardware
from simfront.layout import enumerate_layouts
from simfront.models import apply_precision, get_model
from simfront.search import make_spec, worker_counts
from simfront.serving import NO_SPEC, Workload, aggregated_raw, busiest_rank_context, decode_raw, prefill_raw, worker_raw
from simfront.step import StepBatch, forward_step

# (model, GPU, GPUs): MLA + MoE with dense layers, DSA indexer, linear attention (GDN) + MoE, sliding
# window GQA, plain dense GQA; every layer kind forward_step has
CASES = [("deepseek-r1", "GB200", 144), ("deepseek-v3.2", "B200", 16), ("qwen3-next-80b-a3b", "H200", 16),
         ("gemma-3-27b", "H100", 8), ("llama-3.1-8b", "MI355X", 8)]


def _layouts(model, hw, n):
    lay = enumerate_layouts(model.arch, n, max_tp=hw.scaleup.domain_gpus)
    return {k: v[:, None] for k, v in lay.items()}


def _batches(model, L, wl: Workload):
    """A mixed step whose inputs vary over layouts as the search's do (context and prefilling ranks by DP)."""
    B = np.array([[1.0, 4.0, 24.0, 256.0]])
    ctx = busiest_rank_context(wl.isl + wl.osl / 2.0, L["dp"], B, wl.isl, wl.osl)
    ranks = np.minimum(L["dp"] * 0.5 + B * 0.0, L["dp"])
    return StepBatch(decode_reqs=B, decode_ctx=ctx, q_tokens=2, prefill_tokens=np.array([[0.0, 512.0, 2048.0, 8192.0]]),
                     prefill_seqs=np.array([[0.0, 0.5, 2.0, 8.0]]), prefill_prefix=256.0, prefill_ranks=ranks)


def _plain(fn):
    """Run ``fn`` with layout grouping switched off (every op over every layout)."""
    saved = step_mod.LAYOUT_GROUPING_MIN_LAYOUTS
    step_mod.LAYOUT_GROUPING_MIN_LAYOUTS = 10**9
    try:
        return fn()
    finally:
        step_mod.LAYOUT_GROUPING_MIN_LAYOUTS = saved


def _per_op_sums(st):
    """The plain sums: every op's parts over every layout, added in op order."""
    roof, extra = 0.0, 0.0
    for r in st.ops:
        a, b = st.parts(r)
        roof, extra = roof + a, extra + b
    return np.asarray(roof), np.asarray(extra)


@pytest.mark.parametrize("model_id,gpu,n", CASES)
def test_grouped_ops_equal_plain_ops(model_id, gpu, n):
    m, hw = get_model(model_id), get_hardware(gpu)
    prec = apply_precision(m, "native", "native")
    L = _layouts(m, hw, n)
    sb = _batches(m, L, Workload(isl=2048, osl=512))
    args = (m, prec, hw, L["tp"], L["pp"], L["dp"], L["ep"], sb)
    grouped = forward_step(*args)
    plain = _plain(lambda: forward_step(*args))
    assert grouped.layout is not None and plain.layout is None
    assert any(r.rows is not None and r.n_rows < L["tp"].size for r in grouped.ops)  # some op was grouped
    assert [r.name for r in grouped.ops] == [r.name for r in plain.ops]
    for g, p in zip(grouped.ops, plain.ops):
        for f in _FIELDS:
            a = np.broadcast_arrays(getattr(g.cost, f), getattr(p.cost, f))
            np.testing.assert_array_equal(a[0], a[1], err_msg=f"{g.name}.{f}")
        assert g.cost.kernel == p.cost.kernel
    for a, b in zip(grouped.split(), plain.split()):  # the coarse sums (grouped) and the plain ones
        np.testing.assert_array_equal(*np.broadcast_arrays(a, b))
    for a, b in zip(grouped.split(), _per_op_sums(grouped)):
        np.testing.assert_array_equal(*np.broadcast_arrays(a, b))
    if (L["pp"] > 1).any():  # the pipeline send's count follows PP: the sums finish over every layout
        assert grouped.split()[0].shape[0] == L["tp"].size


def test_grouping_is_checked_not_assumed():
    """An input that varies within a TP group (here: the context by PP) keeps those layouts apart."""
    m, hw = get_model("deepseek-r1"), get_hardware("H200")
    prec = apply_precision(m, "native", "native")
    L = _layouts(m, hw, 16)
    B = np.array([[8.0, 64.0]])
    sb = StepBatch(decode_reqs=B, decode_ctx=1000.0 * L["pp"] + B * 0.0, q_tokens=1)
    args = (m, prec, hw, L["tp"], L["pp"], L["dp"], L["ep"], sb)
    grouped = forward_step(*args)
    plain = _plain(lambda: forward_step(*args))
    attn = next(r for r in grouped.ops if r.name == "mla.attn_decode")
    assert attn.rows is None  # no grouping of (tp, dp, ep) holds a PP-dependent context
    for a, b in zip(grouped.split(), plain.split()):
        np.testing.assert_array_equal(*np.broadcast_arrays(a, b))


def test_memo_gives_the_same_step_and_shares_ops_across_kv_formats():
    m, hw = get_model("deepseek-r1"), get_hardware("B200")
    L = _layouts(m, hw, 16)
    sb = _batches(m, L, Workload(isl=4096, osl=1024))
    memo: dict = {}
    for kv in ("native", "fp8"):
        prec = apply_precision(m, "fp8_block", kv)
        args = (m, prec, hw, L["tp"], L["pp"], L["dp"], L["ep"], sb)
        before = len(memo)
        with_memo = forward_step(*args, memo=memo)
        added = len(memo) - before
        without = forward_step(*args)
        for a, b in zip(with_memo.split(), without.split()):
            np.testing.assert_array_equal(a, b)
    # the FP8-KV step repeats every op but the attention kernels: only those are new in the memo
    assert 0 < added < 8 and len(memo) > 20


@pytest.mark.parametrize("model_id,spec_methods", [("deepseek-r1", ("none", "mtp")), ("qwen3-235b-a22b", ("none", "eagle", "ngram"))])
def test_worker_raw_equals_one_call_per_step(model_id, spec_methods):
    m, hw = get_model(model_id), get_hardware("H200")
    prec = apply_precision(m, "native", "fp8")
    L = _layouts(m, hw, 16)
    B = np.array([[1.0, 2.0, 16.0, 128.0, 512.0]])
    wl = Workload(isl=4096, osl=512, prefix_hit=0.25)
    specs = [make_spec(s, k, None, m) for s in spec_methods for k in ((None,) if s in ("none", "ngram") else (1, 3))]
    lay = (L["tp"], L["pp"], L["dp"], L["ep"])
    one = L["pp"][:, 0] == 1
    pb = np.array([[1.0, 2.0, 4.0, 8.0]])
    d_raws, aggs, pre = worker_raw(m, prec, hw, *lay, B, wl, specs, (2048, 8192), prefill_batch=pb, prefill_rows=one)
    want_pre = prefill_raw(m, prec, hw, *(x[one] for x in lay), pb, wl, 1.0)
    for got, want in zip(pre, want_pre):
        np.testing.assert_array_equal(got, want)
    for i, spec in enumerate(specs):
        want = decode_raw(m, prec, hw, *lay, B, wl, spec)
        np.testing.assert_array_equal(d_raws[i][0], want[0])
        assert d_raws[i][1] == want[1]
        np.testing.assert_array_equal(d_raws[i][2], want[2])
        for chunk in (2048, 8192):
            a = aggs[chunk][i]
            w = aggregated_raw(m, prec, hw, *lay, B, replace(wl, chunk_tokens=float(chunk)), spec)
            for f in ("decode_step_s", "mixed_step_s", "mixed_tokens", "mixed_share", "batch", "rho", "slots", "chunk"):
                np.testing.assert_array_equal(*np.broadcast_arrays(getattr(a, f), getattr(w, f)), err_msg=f)
            assert (a.al, a.isl_new, a.osl) == (w.al, w.isl_new, w.osl)


def test_worker_raw_without_token_budgets_is_the_decode_step():
    m, hw = get_model("llama-3.1-8b"), get_hardware("H100")
    prec = apply_precision(m, "native", "native")
    L = _layouts(m, hw, 8)
    B = np.array([[1.0, 64.0]])
    d_raws, aggs, pre = worker_raw(m, prec, hw, L["tp"], L["pp"], L["dp"], L["ep"], B, Workload(), [NO_SPEC])
    assert aggs == {} and pre is None
    np.testing.assert_array_equal(d_raws[0][0], decode_raw(m, prec, hw, L["tp"], L["pp"], L["dp"], L["ep"], B, Workload())[0])


@settings(max_examples=200, deadline=None)
@given(st.integers(2, 600), st.lists(st.tuples(st.integers(1, 72), st.floats(0.01, 100.0), st.integers(1, 72), st.floats(0.01, 100.0)),
                                     min_size=1, max_size=30))
def test_pairs_larger_than_the_set_get_no_workers(n, pairs):
    dg, dc, pg, pc = (np.array([p[i] for p in pairs], dtype=float) for i in range(4))
    x, y = worker_counts(dg, dc, pg, pc, n)
    too_big = dg + pg > n
    assert (x[too_big] == 0).all() and (y[too_big] == 0).all()
    # and sizing a subset gives each pair what sizing them all gives (elementwise)
    keep = ~too_big
    if keep.any():
        xs, ys = worker_counts(dg[keep], dc[keep], pg[keep], pc[keep], n)
        np.testing.assert_array_equal(xs, x[keep])
        np.testing.assert_array_equal(ys, y[keep])


def test_engine_step_shortcut_equals_step_terms():
    from simfront.serving import _apply, engine_profile, step_terms

    rng = np.random.default_rng(2)
    split = rng.random((2, 7, 5)) * 1e-2
    for prof in (engine_profile(None), engine_profile("vllm"), dict(engine_profile(None), request_overhead_s=3e-6, kernel_overlap=0.4)):
        for req in (0.0, rng.random((1, 5)) * 64):
            np.testing.assert_array_equal(_apply(split, prof, req), step_terms(split, prof, req)["engine_s"])


def test_memo_does_not_carry_costs_across_efficiency_overrides():
    from simfront import efficiency

    m, hw = get_model("llama-3.1-70b"), get_hardware("H100")
    prec = apply_precision(m, "native", "native")
    L = _layouts(m, hw, 8)
    sb = StepBatch(decode_reqs=np.array([[1.0, 32.0]]), decode_ctx=2048.0, q_tokens=1)
    args = (m, prec, hw, L["tp"], L["pp"], L["dp"], L["ep"], sb)
    memo: dict = {}
    shipped = sum(forward_step(*args, memo=memo).split())
    slow = {"gemm": {hw.family: {"launch_s_bf16": 2.5e-5}}}  # every BF16 GEMM 25 us to launch
    with efficiency.using(slow):
        slower = sum(forward_step(*args, memo=memo).split())
        np.testing.assert_array_equal(slower, sum(forward_step(*args).split()))
    assert (slower > shipped).all()
    np.testing.assert_array_equal(sum(forward_step(*args, memo=memo).split()), shipped)  # and back


@settings(max_examples=300, deadline=None)
@given(st.integers(2, 700), st.lists(st.tuples(st.integers(1, 72), st.floats(0.01, 100.0), st.integers(1, 72), st.floats(0.01, 100.0)),
                                     min_size=1, max_size=20))
def test_worker_counts_are_the_best_of_every_decode_worker_count(n, pairs):
    """worker_counts' bisection (about log2 n halvings) gives what trying every decode-worker count gives: the y that
    serves the most requests/s (the first such y), with the prefill workers it needs or what fits."""
    dg, dc, pg, pc = (np.array([p[i] for p in pairs], dtype=float) for i in range(4))
    x, y = worker_counts(dg, dc, pg, pc, n)
    for i in range(len(pairs)):
        best, bx, by = 0.0, 0.0, 0.0
        for yy in range(1, int((n - 1) // dg[i]) + 1):
            rem = n - yy * dg[i]
            xx = min(np.floor(rem / pg[i]), np.ceil(yy * dc[i] / pc[i]))
            rate = min(xx * pc[i], yy * dc[i])
            if xx >= 1 and rem > 0 and rate > best:
                best, bx, by = rate, xx, yy
        assert (x[i], y[i]) == (bx, by)
