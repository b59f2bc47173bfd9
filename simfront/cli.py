"""simfront command line: a thin layer over the Python API (``simfront.api``).

Every command prints a human-readable table by default and one JSON document with ``--json``.
User errors print one line ``error: ...`` and exit with status 2, never a traceback.
"""

from __future__ import annotations

import json
import sys
from typing import List, Optional

import typer

try:  # typer >= 0.2x vendors click as typer._click; older typer depends on click
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - depends on the installed typer
    from click import exceptions as click_exc

from . import api
from .errors import SimfrontError
from .format import print_table

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="simfront: predict the latency-throughput frontier of LLM serving configurations from hardware and model specs.",
)

ModelOpt = typer.Option(..., "--model", "-m", help="Catalog id (kimi-k3), Hugging Face id (deepseek-ai/DeepSeek-R1) or path to a config.json.")
GpusOpt = typer.Option(..., "--gpus", "-g", help="GPU set as COUNTxGPU, e.g. 8xB200, 16xH200, 72xGB200.")
PrecisionOpt = typer.Option("native", "--precision", help="Weight precision: native, bf16, fp8, fp8_block, nvfp4, mxfp4, w4a16.")
KvOpt = typer.Option("native", "--kv-dtype", help="KV-cache dtype: native, bf16, fp8.")
JsonOpt = typer.Option(False, "--json", help="Print one JSON document (stable interface, see README).")
CalOpt = typer.Option(None, "--calibration", help="Calibration profile YAML written by `simfront calibrate`.")


def _emit_json(obj) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=api.json_default) + "\n")


def _load_calibration(path: Optional[str]) -> None:
    if path:
        api.use_calibration(path)


@app.command("models")
def models_cmd(as_json: bool = JsonOpt) -> None:
    """List the model catalog: parameters, architecture, native precision."""
    rows = api.list_models()
    if as_json:
        return _emit_json(rows)
    print_table(rows, ["name", ("total_params", "total", "{:.1f}B", 1e-9), ("active_params", "active", "{:.1f}B", 1e-9), "native_precision", "architecture"])


@app.command("hardware")
def hardware_cmd(as_json: bool = JsonOpt) -> None:
    """List the accelerator catalog: dense peaks, memory, links, power, price."""
    rows = api.list_hardware()
    if as_json:
        return _emit_json(rows)
    print_table(rows, ["id", "name", ("bf16_tflops", "BF16 TF", "{:,.0f}"), ("fp8_tflops", "FP8 TF", "{:,.0f}"), ("fp4_tflops", "FP4 TF", "{:,.0f}"),
                       ("hbm_gib", "HBM GiB", "{:,.0f}"), ("hbm_tb_s", "HBM TB/s", "{:.2f}"), ("scaleup_gb_s", "link GB/s/dir", "{:,.0f}"),
                       "scaleup_domain", ("power_w", "W", "{:,.0f}"), ("price_usd_per_hour", "$/h", "{:.2f}")])


@app.command("memory")
def memory_cmd(
    model: str = ModelOpt,
    gpus: str = GpusOpt,
    precision: str = PrecisionOpt,
    kv_dtype: str = KvOpt,
    isl: int = typer.Option(1024, "--isl", help="Input tokens per request."),
    osl: int = typer.Option(1024, "--osl", help="Output tokens per request."),
    tp: Optional[int] = typer.Option(None, "--tp", help="Tensor parallel size (default: best fit)."),
    pp: int = typer.Option(1, "--pp"),
    ep: int = typer.Option(1, "--ep"),
    attention_dp: int = typer.Option(1, "--attention-dp"),
    as_json: bool = JsonOpt,
) -> None:
    """Does the model fit? Weights per GPU, KV bytes per token, KV capacity, fewest GPUs that fit."""
    v = api.memory(model, gpus, precision=precision, kv_dtype=kv_dtype, isl=isl, osl=osl, tp=tp, pp=pp, ep=ep, attention_dp=attention_dp)
    if as_json:
        return _emit_json(v)
    api.print_memory(v)


def main() -> None:
    """Console entry point: one-line errors, non-zero exit, no traceback."""
    try:
        app(standalone_mode=False)
    except SimfrontError as e:
        sys.stderr.write(f"error: {e}\n")
        sys.exit(2)
    except click_exc.UsageError as e:
        if type(e).__name__ == "NoArgsIsHelpError":  # bare `simfront`: show help, not an error
            sys.stdout.write(e.format_message() + "\n")
            sys.exit(0)
        sys.stderr.write(f"error: {e.format_message()}\n")
        sys.exit(2)
    except click_exc.Abort:
        sys.stderr.write("error: aborted\n")
        sys.exit(130)
    except click_exc.Exit as e:
        sys.exit(e.exit_code)
    except BrokenPipeError:
        sys.exit(0)


if __name__ == "__main__":
    main()
