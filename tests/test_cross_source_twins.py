"""One run recorded in two files (simfront/ingest/checks.py::cross_source_twins)."""

from __future__ import annotations

from simfront.ingest import load_measurements

HEADER = ("source,model,gpu,num_gpus,tp,pp,ep,dp_attention,disagg,engine,precision_weights,precision_act,precision_kv,"
          "isl,osl,concurrency,batch_size,metric_tpot_ms,metric_ttft_ms,notes")


def _file(tmp_path, name, rows):
    path = tmp_path / name
    lines = [HEADER] + [f"t,deepseek-ai/DeepSeek-R1,B200,8,{tp},1,{ep},,,{engine},fp8,,,1024,1024,{c},{c},{tpot},{ttft},{notes}"
                        for tp, ep, engine, c, tpot, ttft, notes in rows]
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def _messages(res):
    return [str(p) for p in res.problems]


def test_a_silent_copy_of_an_mtp_run_counts_once_and_puts_its_campaign_in_doubt(tmp_path):
    recorded = _file(tmp_path, "recorded.csv", [(8, 1, "trtllm", 4, 5.4, 195.0, "spec_decoding=mtp")])
    silent = _file(tmp_path, "silent.csv", [
        (8, 1, "trtllm", 4, 5.4002, 195.01, ""),   # the same run, 0.004 % off: counted once, as the recorded row
        (8, 1, "trtllm", 32, 10.9, 296.0, ""),     # the same engine build and checkpoint: MTP or not cannot be told
        (8, 1, "sglang", 32, 12.0, 300.0, ""),     # another engine build: untouched
    ])
    res = load_measurements([recorded, silent])
    assert sorted((p.source_file.endswith("recorded.csv"), p.engine, p.concurrency) for p in res.points) == [
        (False, "sglang", 32.0), (True, "trtllm", 4.0)]
    msgs = _messages(res)
    assert any(":2: the same run as" in m and "speculative decoding = mtp" in m for m in msgs)
    assert any(":3: its campaign" in m and "(mtp)" in m for m in msgs)
    dup = next(s for s in res.skipped if "the same run as" in s["message"])
    assert dup["duplicate_of"]["source_file"].endswith("recorded.csv") and dup["duplicate_of"]["line"] == 2


def test_twins_that_agree_on_everything_count_once_and_separate_runs_stay(tmp_path):
    a = _file(tmp_path, "a.csv", [(8, 1, "trtllm", 4, 10.3, 189.0, "spec_decoding=none"), (8, 1, "trtllm", 8, 11.1, 181.0, "")])
    b = _file(tmp_path, "b.csv", [(8, 1, "trtllm", 4, 10.3, 189.0, ""),     # copy of a:2
                                   (8, 1, "trtllm", 8, 11.3, 181.0, "")])   # 2 % off in TPOT: another run
    res = load_measurements([a, b])
    assert len(res.points) == 3
    assert not any("its campaign" in m for m in _messages(res))  # the kept twin ran without speculation


def test_equal_metrics_inside_one_file_are_not_cross_source_twins(tmp_path):
    one = _file(tmp_path, "one.csv", [(8, 1, "trtllm", 4, 10.3, 189.0, ""), (4, 1, "trtllm", 4, 10.3, 189.0, "")])
    res = load_measurements([one])
    assert not any("the same run as" in m for m in _messages(res))


def _rows(tmp_path, name, models):
    path = tmp_path / name
    path.write_text("\n".join([HEADER] + [f"t,{m},B200,8,8,1,1,,,trtllm,fp8,,,1024,1024,4,4,10.3,189.0," for m in models]) + "\n")
    return str(path)


def test_one_run_under_two_names_of_one_architecture_in_one_file_counts_once(tmp_path):
    # an R1 run filed again as V3 (the same architecture, config.json for config.json): one measurement
    res = load_measurements([_rows(tmp_path, "one.csv", ["deepseek-ai/DeepSeek-R1", "deepseek-ai/DeepSeek-V3"])])
    assert [p.model for p in res.points] == ["deepseek-ai/DeepSeek-R1"]
    dup = next(s for s in res.skipped if "the same run as" in s["message"])
    assert dup["line"] == 3 and dup["duplicate_of"]["line"] == 2 and "counted once" in dup["message"]


def test_equal_metrics_of_two_architectures_stay_two_rows_with_a_warning(tmp_path):
    # equal numbers for models of different architectures cannot be one run of one model: both kept, flagged
    res = load_measurements([_rows(tmp_path, "two.csv", ["deepseek-ai/DeepSeek-R1", "Qwen/Qwen3-235B-A22B"])])
    assert len(res.points) == 2
    assert any("recorded twice?" in w for p in res.points for w in p.warnings)
