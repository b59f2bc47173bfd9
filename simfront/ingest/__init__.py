"""Ingest measured serving results from benchmark tools into one canonical record.

Formats: vLLM ``bench serve`` JSON/JSONL, SGLang ``bench_serving`` JSONL, AIPerf and
genai-perf profile exports, GuideLLM ``benchmarks.json``, ``trtllm-bench`` report JSON, the
aiconfigurator serving CSV and the flat measured-point CSV. Metrics are mapped by
definition, not by name (ecosystem.md §6); see :class:`MeasuredPoint`.
"""

from .detect import detect_format
from .load import load_measurements
from .schema import FORMATS, IngestResult, MeasuredPoint

__all__ = ["FORMATS", "IngestResult", "MeasuredPoint", "detect_format", "load_measurements"]
