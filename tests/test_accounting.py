"""Every frontier point obeys its own accounting, for every catalog model on GPU sets of three kinds.

A point's numbers come from one evaluator but are reported as separate fields; these identities tie them
together so that no later change can make one of them drift from the others:

- Little's law: requests in flight = completed requests/s x time a request spends in the system
  (TTFT + (OSL - 1) x TPOT), so the reported concurrency is what the throughput and latencies imply;
- output tokens = requests x OSL: tok/s/GPU x GPUs of the set = requests/s x OSL (idle GPUs of the set count,
  as the README's tok/s/GPU definition says);
- tok/s/user = 1000 / TPOT (ms) and $/Mtok = price per GPU-second / tok/s/GPU x 10^6;
- a deployment never uses more GPUs than the set, and prefill + decode workers account for a disaggregated one.
"""

from __future__ import annotations

import math

import pytest

from simfront import api
from simfront.errors import SimfrontError
from simfront.models import catalog_ids

# a fitted GPU, a GPU that borrows another family's kernel parameters, and a rack-scale NVLink domain
GPU_SETS = ("8xH100", "8xMI300X", "72xGB200")
ISL, OSL = 2048, 512
REL = 2e-3  # the fields are rounded for output (concurrency to a whole request, metrics to a few digits)


def _frontiers():
    for gpus in GPU_SETS:
        for model in catalog_ids():
            yield pytest.param(model, gpus, id=f"{model}-{gpus}")


@pytest.mark.parametrize("model,gpus", list(_frontiers()))
def test_frontier_points_obey_their_accounting(model, gpus):
    try:
        f = api.predict(model, gpus, isl=ISL, osl=OSL)
    except SimfrontError as err:  # a model that does not fit says so in one line, naming a value
        assert "\n" not in str(err) and str(err)
        return
    n_set = int(gpus.split("x")[0])
    if not f.frontier:
        assert f.notes, "an empty frontier must say why"
        return
    assert f.knee in f.frontier
    for p in f.frontier:
        fields = (p.ttft_ms, p.tpot_ms, p.tok_s_user, p.tok_s_gpu, p.usd_per_mtok, p.requests_s)
        assert all(v is not None and math.isfinite(v) and v > 0 for v in fields), p.layout
        e2e_s = (p.ttft_ms + (OSL - 1) * p.tpot_ms) / 1e3
        assert p.requests_s * e2e_s == pytest.approx(p.concurrency, rel=REL), p.layout
        assert p.tok_s_gpu * n_set == pytest.approx(p.requests_s * OSL, rel=REL), p.layout
        assert p.tok_s_user == pytest.approx(1000.0 / p.tpot_ms, rel=REL), p.layout
        assert p.usd_per_mtok == pytest.approx(f.price_usd_per_gpu_hour / 3600.0 / p.tok_s_gpu * 1e6, rel=REL), p.layout
        assert 1 <= p.gpus_used <= n_set, p.layout
        if p.mode == "disagg":
            assert p.prefill_workers >= 1 and p.decode_workers >= 1, p.layout
