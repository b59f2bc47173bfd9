"""Delta-rule linear attention cost: hand-derived work and invariants (no calibration data exists)."""

import inspect

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simfront.attention import attention_decode_cost
from simfront.hardware import get_hardware
from simfront.linear_attention import linear_attention_decode_cost, linear_attention_prefill_cost
from kernel_data import more_hbm



H100 = get_hardware("h100_sxm")
B200 = get_hardware("b200_sxm")
GPUS = [H100, B200, get_hardware("a100_sxm")]
FAST = settings(max_examples=60, deadline=None)


def test_decode_work_qwen3_next_tp8():
    # Qwen3-Next GDN at TP8: 32/8 = 4 value heads per GPU, dk = dv = 128, FP32 state (specs.md B.4);
    # conv channels (2*16*128 + 32*128)/8 = 1024, kernel 4.
    c = linear_attention_decode_cost(batch=64, n_heads=4, head_k_dim=128, head_v_dim=128, hw=H100, conv_dim=1024, conv_kernel=4)
    state = 64 * 4 * 128 * 128 * 4 * 2  # read + write the FP32 state
    conv = 64 * 1024 * 3 * 2 * 2  # read + write 3 BF16 conv taps per channel
    act = 64 * 4 * (2 * 128 + 2 * 128) * 2  # q, k, v in and o out, BF16
    assert float(c.mem_bytes) == pytest.approx(state + conv + act)
    assert float(c.flops) == pytest.approx(6 * 64 * 4 * 128 * 128 + 2 * 64 * 1024 * 4)
    assert c.bound == "memory"


def test_decode_constant_in_context_and_spec_verify():
    # no context argument at all: the recurrent state replaces the KV cache
    sig = inspect.signature(linear_attention_decode_cost).parameters
    assert not {"kv_len", "seq_len", "context"} & set(sig)
    # spec verify: the state is read once and one state is written per token
    one = linear_attention_decode_cost(16, 8, 128, 128, H100)
    three = linear_attention_decode_cost(16, 8, 128, 128, H100, q_tokens=3)
    st_bytes = 16 * 8 * 128 * 128 * 4
    assert float(three.mem_bytes) - float(one.mem_bytes) == pytest.approx(2 * st_bytes + 16 * 2 * 8 * 512 * 2)
    # at long context a softmax layer of similar width costs far more than the linear layer
    full = attention_decode_cost(16, 131072, 8, 8, 128, 0, 2, H100)
    assert float(one.time_s) < 0.05 * float(full.time_s)


def test_prefill_work_convention():
    # per head and token: 2*C*(3*dk + 2*dv) intra-chunk + 6*dk*dv inter-chunk (Yang et al. 2024)
    c = linear_attention_prefill_cost(batch=1, seq_len=1024, n_heads=4, head_k_dim=128, head_v_dim=128, hw=H100, chunk=64)
    assert float(c.flops) == pytest.approx(4 * 1024 * (2 * 64 * (3 * 128 + 2 * 128) + 6 * 128 * 128))
    # bytes: BF16 q/k/v/o plus 1024/64 = 16 chunk states + initial and final state, FP32
    assert float(c.mem_bytes) == pytest.approx(4 * (1024 * 512 * 2 + 18 * 128 * 128 * 4))


def test_prefill_linear_in_length_unlike_softmax():
    t1 = float(linear_attention_prefill_cost(8, 8192, 16, 128, 128, H100).flops)
    t2 = float(linear_attention_prefill_cost(8, 16384, 16, 128, 128, H100).flops)
    assert t2 == pytest.approx(2 * t1)


@given(b=st.integers(1, 2048), h=st.sampled_from([1, 4, 8, 32, 96]), d=st.sampled_from([64, 128]),
       q=st.integers(1, 4), conv=st.sampled_from([0, 1024, 8192]), hw=st.sampled_from(GPUS), f=st.floats(1.0, 4.0))
@FAST
def test_decode_invariants(b, h, d, q, conv, hw, f):
    c = linear_attention_decode_cost(b, h, d, d, hw, conv_dim=conv, q_tokens=q)
    t = float(c.time_s)
    assert np.isfinite(t) and t > 0 and float(c.mem_bytes) > 0
    assert float(linear_attention_decode_cost(int(b * f) + 1, h, d, d, hw, conv_dim=conv, q_tokens=q).time_s) >= t * (1 - 1e-12)
    faster = more_hbm(hw, 2.0)
    assert float(linear_attention_decode_cost(b, h, d, d, faster, conv_dim=conv, q_tokens=q).time_s) <= t * (1 + 1e-12)


@given(b=st.integers(1, 64), s=st.integers(1, 131072), h=st.sampled_from([1, 4, 16, 96]), d=st.sampled_from([64, 128]),
       hw=st.sampled_from(GPUS), f=st.floats(1.0, 4.0))
@FAST
def test_prefill_invariants(b, s, h, d, hw, f):
    c = linear_attention_prefill_cost(b, s, h, d, d, hw)
    t = float(c.time_s)
    assert np.isfinite(t) and t > 0
    assert float(linear_attention_prefill_cost(b, int(s * f) + 1, h, d, d, hw).time_s) >= t * (1 - 1e-12)
    assert float(linear_attention_prefill_cost(int(b * f) + 1, s, h, d, d, hw).time_s) >= t * (1 - 1e-12)


def test_broadcast():
    c = linear_attention_prefill_cost(np.array([1, 4]), np.array([[512], [4096]]), 8, 128, 128, B200)
    assert c.time_s.shape == (2, 2) and np.all(np.diff(c.time_s, axis=0) > 0)
