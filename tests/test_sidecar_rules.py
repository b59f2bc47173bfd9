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


def test_a_rule_can_say_the_run_overlapped_its_speculative_decoding(tmp_path):
    """``spec_overlap`` (SGLang's SGLANG_ENABLE_SPEC_V2=1 in a recipe) is read as a boolean and reaches the evaluator:
    the same SGLang 0.5.8 MTP row is priced faster with it than with the release's own (serial) default."""
    from simfront.measured import predict_points

    rules = "rules:\n  - where: {engine: sglang, spec_decoding: mtp}\n    set: {spec_overlap: 'yes', engine_version: '0.5.8'}\n"
    res = _rows(tmp_path, rules)
    assert res.problems == [] and [p.spec_overlap for p in res.points] == [None, None, True, None]
    row = res.points[2]
    serial = row.model_copy(update={"spec_overlap": None})
    overlapped, plain = predict_points([row, serial])
    assert overlapped["predicted_tpot_ms"] < plain["predicted_tpot_ms"]


def test_a_rule_can_say_the_runs_experts_were_load_balanced(tmp_path):
    """``routing_skew`` (a number, or "balanced" for an expert load balancer) reaches the evaluator: the same
    expert-parallel row is priced differently with balanced routing than with simfront's default skew (1.01, the same
    as giving it), a steeper skew puts more tokens on the busiest rank, and a value that is neither is reported with
    the rule ignored. (At a few tokens per rank balanced routing can cost more: it touches more distinct experts.)"""
    from simfront.measured import predict_points

    rules = "rules:\n  - where: {engine: trtllm, spec_decoding: mtp, attention_dp: 8}\n    set: {routing_skew: Balanced}\n"
    res = _rows(tmp_path, rules)
    assert res.problems == [] and [p.routing_skew for p in res.points] == [None, "balanced", None, None]
    row = res.points[1]
    balanced, default, given, steep = predict_points([row, row.model_copy(update={"routing_skew": None}),
                                                      row.model_copy(update={"routing_skew": 1.01}),
                                                      row.model_copy(update={"routing_skew": 2.0})])
    assert default["predicted_tpot_ms"] == given["predicted_tpot_ms"]
    assert balanced["predicted_tpot_ms"] != default["predicted_tpot_ms"] != steep["predicted_tpot_ms"]
    res = _rows(tmp_path, "rules:\n  - where: {engine: sglang}\n    set: {routing_skew: even}\n")
    assert any("routing_skew" in p for p in res.problems) and all(p.routing_skew is None for p in res.points)


def test_the_inferencemax_sidecar_gives_the_disaggregated_sglang_recipes_to_the_rows_they_ran():
    """NVIDIA/srt-slurm recipe variants: FP8 1k1k max-throughput MTP 1p5d (decode cap 512 over 8 ranks, two drafts,
    spec V2), its 1p2d variant (one draft), a FP4 8k1k TP4 1p1d low-latency run (cap 512); a row of an earlier
    recipe version with another layout keeps simfront's defaults but for the MTP setting every variant shares (two
    drafts, spec V2)."""
    from pathlib import Path

    path = Path(__file__).resolve().parent.parent / "measurements" / "inferencemax_b200_h100.csv"
    res = load_measurements([str(path)])
    assert res.problems == []
    by_line = {p.line: p for p in res.points}
    got = lambda n: (by_line[n].decode_batch, by_line[n].spec_k, by_line[n].spec_overlap)  # noqa: E731
    assert got(13) == (64, 2, True)   # fp8 1k/1k MTP, P1 dep8 / D5 dep8, 4096 users
    assert got(12) == (64, 1, True)   # fp8 1k/1k MTP 1p2d
    assert got(21) == (512, None, None)  # fp4 8k/1k STP, TP4 prefill, tp8 decode
    assert got(5) == (None, 2, True)  # fp4 8k/1k MTP, TP4 prefill with 5 decode workers: no such variant, no cap assumed
    # Dynamo + TensorRT-LLM: nvidia-master.yaml's recipe names (ctx1_gen3_tep16_batch1_eplb0_mtp0, ..._batch32_..._mtp2)
    assert got(117) == (1, None, None) and got(120) == (32, 2, None) and got(22) == (1, 3, None)
    # Dynamo + SGLang on H100: its recipes set no KV-cache dtype (SGLang's "auto": BF16); every other row keeps the FP8
    # cache simfront assumes for quantised recipes (no kv_dtype on the row)
    assert (by_line[102].kv_dtype, by_line[102].spec_k, by_line[102].spec_overlap) == ("bf16", 2, True)
    assert by_line[117].kv_dtype is None and by_line[13].kv_dtype is None


def test_the_inferencemax_sidecar_gives_the_tensorrt_llm_rows_their_recipe_files_batch_caps():
    """The per-concurrency recipe files' decode caps (B200 FP8 1k/1k, three TP8 decode servers: 1 at four clients for
    the runs whose p99 TTFT shows the wait, 12 at 32) and every recipe's prefill batch cap (prompts per prefill worker:
    per rank x attention-DP ranks; one prompt per rank, the default, where the file holds one)."""
    from pathlib import Path

    from simfront.validation import predict_points

    path = Path(__file__).resolve().parent.parent / "measurements" / "inferencemax_b200_h100.csv"
    res = load_measurements([str(path)])
    by_line = {p.line: p for p in res.points}
    assert [by_line[n].decode_batch for n in (159, 160, 32, 33)] == [1024, 1, 1, 12]
    assert [by_line[n].prefill_batch for n in (34, 25, 27, 117, 40, 122)] == [128, 32, 8, 32, None, None]
    # three slots for four clients: the fourth waits about one request's decode, so the mean TTFT is seconds
    early, capped = predict_points([by_line[159], by_line[160]])
    assert early["predicted_ttft_ms"] < 500 < 1500 < capped["predicted_ttft_ms"]


def test_the_inferencemax_sidecar_gives_the_sglang_prefill_servers_their_budgets():
    """SGLang prefill servers: prompts per step from --max-prefill-tokens (and --chunked-prefill-size over the
    attention-DP size); a per-rank budget below a prompt is the row's token_budget, and the prompt is prefilled in
    chunks (the H100 TP16 servers' 2,048 tokens against 8k prompts)."""
    from pathlib import Path

    from simfront.validation import predict_points

    path = Path(__file__).resolve().parent.parent / "measurements" / "inferencemax_b200_h100.csv"
    by_line = {p.line: p for p in load_measurements([str(path)]).points}
    got = lambda n: (by_line[n].prefill_batch, by_line[n].token_budget)  # noqa: E731
    assert got(9) == (32, None) and got(141) == (32, None)  # FP8 1k1k: TP8 32,768 tokens, or DPA8 4,096 per rank
    assert got(151) == (4, None) and got(156) == (None, 4096)  # csahithi FP8 8k1k: TP8 EP8, and DPA8 in chunks
    assert got(104) == (2, 2048) and got(116) == (None, 2048)  # H100 TP16 prefill: two 1k prompts, 8k in chunks
    assert got(18) == (None, None)  # NVIDIA FP8 8k1k: one 8k prompt per rank, the default
    # chunked prefill of an 8k prompt takes longer than the whole-prompt step the row would get without its budget
    row = by_line[116]
    chunked, whole = predict_points([row, row.model_copy(update={"token_budget": None})])
    assert chunked["predicted_ttft_ms"] > whole["predicted_ttft_ms"]


def test_an_included_sidecar_applies_to_the_rows_its_where_selects_and_the_files_own_rules_win(tmp_path):
    """``include``: another file's sidecar (a file of the same runs) applies its fields and rules to the rows the include
    selects, narrowed by its ``where``; this file's own rules come after and win; a missing file is a problem."""
    (tmp_path / "other.simfront.yaml").write_text(RULES)
    own = ("include:\n  - {file: other.simfront.yaml, where: {engine: trtllm}}\n"
           "rules:\n  - where: {engine: trtllm, attention_dp: 8}\n    set: {spec_k: 2}\n")
    res = _rows(tmp_path, own)
    assert res.problems == []
    got = [(p.engine, p.spec_k, p.random_range_ratio) for p in res.points]
    # TensorRT-LLM rows take the other file's rules (3; its range ratio), the DP one this file's own rule (2 over 1);
    # the SGLang row is outside the include: neither the other file's spec_k 2 nor its range ratio
    assert got == [("trtllm", 3, 0.8), ("trtllm", 2, 0.8), ("sglang", None, None), ("trtllm", None, 0.8)]
    gone = _rows(tmp_path, "include:\n  - {file: nowhere.simfront.yaml}\n")
    assert any("nowhere.simfront.yaml" in p for p in gone.problems)
    assert _rows(tmp_path, "include: other.simfront.yaml\n").problems  # not a list of {file, where}: said, ignored
