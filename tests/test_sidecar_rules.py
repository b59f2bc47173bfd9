"""Conditional sidecar fields (``rules: [{where, set}]``): one recipe setting for some rows, another for others."""

from __future__ import annotations

from simfront.ingest import load_measurements

HEADER = ("source,model,gpu,num_gpus,tp,pp,ep,dp_attention,disagg,engine,precision_weights,precision_act,precision_kv,"
          "isl,osl,concurrency,batch_size,metric_tpot_ms,metric_ttft_ms,notes")


def _rows(tmp_path, sidecar: str):
    path = tmp_path / "runs.csv"
    path.write_text("\n".join([
        HEADER,
        "t,deepseek-ai/DeepSeek-R1,B200,8,8,1,8,false,,TensorRT-LLM,fp8,,,1024,1024,4,4,8.0,200,spec_decoding=mtp",
        "t,deepseek-ai/DeepSeek-R1,B200,8,8,1,8,true,,TensorRT-LLM,fp8,,,1024,1024,64,8,20.0,300,spec_decoding=mtp",
        "t,deepseek-ai/DeepSeek-R1,B200,8,8,1,8,false,,SGLang,fp8,,,1024,1024,4,4,9.0,210,spec_decoding=mtp",
        "t,deepseek-ai/DeepSeek-R1,B200,8,8,1,8,false,,TensorRT-LLM,fp8,,,1024,1024,8,8,10.0,220,",
    ]) + "\n")
    (tmp_path / "runs.csv.simfront.yaml").write_text(sidecar)
    return load_measurements([str(path)])


RULES = """\
random_range_ratio: 0.8
rules:
  - where: {engine: sglang, spec_decoding: mtp}
    set: {spec_k: 2}
  - where: {engine: trtllm, spec_decoding: mtp, attention_dp: 1}
    set: {spec_k: 3}
  - where: {engine: trtllm, spec_decoding: mtp, attention_dp: [2, 4, 8]}
    set: {spec_k: 1}
"""


def test_rules_set_a_field_on_the_rows_they_match_and_say_so(tmp_path):
    res = _rows(tmp_path, RULES)
    assert res.problems == []
    got = [(p.engine, p.attention_dp, p.spec_decoding, p.spec_k, p.random_range_ratio) for p in res.points]
    assert got == [("trtllm", 1, "mtp", 3, 0.8), ("trtllm", 8, "mtp", 1, 0.8), ("sglang", 1, "mtp", 2, 0.8),
                   ("trtllm", 1, None, None, 0.8)]
    assert "sidecar-rule-2" in res.points[0].notes and "sidecar-rule-1" not in res.points[0].notes


def test_a_rule_that_cannot_be_read_is_reported_and_the_others_apply(tmp_path):
    bad = RULES + "  - where: {engine: trtllm, no_such_field: 1}\n    set: {spec_k: 5}\n  - just a string\n"
    res = _rows(tmp_path, bad)
    assert any("rule 4" in p and "no_such_field" in p for p in res.problems)
    assert any("rule 5" in p for p in res.problems)
    assert [p.spec_k for p in res.points] == [3, 1, 2, None]
