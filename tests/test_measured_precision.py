"""How a measured row's precision name is read against the model's checkpoint."""

from simfront.measured import resolve


def _row(**kw):
    return {"model": "deepseek-ai/DeepSeek-R1-0528", "gpu": "B200", "isl": 1024, "osl": 1024, **kw}


def test_generic_fp8_names_a_block_fp8_checkpoint_as_shipped():
    r, why = resolve(_row(precision="fp8"))
    assert why is None
    assert r.precision.experts == "fp8_block" and r.precision.attention == "fp8_block"  # not a per-tensor requantisation
    assert r.precision.kv == "fp8"  # quantised recipes of these sources run an FP8 KV cache unless the row says


def test_other_formats_are_still_applied():
    r, _ = resolve(_row(precision="nvfp4"))
    assert r.precision.experts == "nvfp4"
    r, _ = resolve(_row(precision="fp8", kv_dtype="bf16"))
    assert r.precision.kv == "bf16"
