"""Printing and plotting of the fidelity checks (``simfront validate --frontier``): residual trends by
knob and measured frontiers against predicted ones. Formats what :mod:`simfront.fidelity` computed."""

from __future__ import annotations

from .format import print_table


def print_fidelity(fid: dict) -> None:
    trends = fid.get("trends") or []
    if trends:
        print("\nresidual trends: median predicted/measured by knob bin (1.00 = unbiased; bins under 10 rows marked ~)")
        rows = []
        for t in trends:
            rows.append({"knob": t["knob"], "bin": t["bin"] + ("" if t["judged"] else " ~"), "n": t["count"],
                         "tpot": t["tpot_ms_ratio"], "ttft": t["ttft_ms_ratio"], "tok_gpu": t["output_tok_s_per_gpu_ratio"]})
        print_table(rows, ["knob", "bin", "n", ("tpot", "TPOT", "{:.2f}"), ("ttft", "TTFT", "{:.2f}"), ("tok_gpu", "tok/s/GPU", "{:.2f}")])
    fr = fid.get("frontiers") or {}
    for name, title in (("summary", "sweeps over both modes (simfront searches agg and disagg; classes carry the mode)"),
                        ("summary_by_mode", "each mode apart (a mode's measured Pareto set against simfront's frontier of that mode)")):
        summ = fr.get(name) or {}
        if summ:
            print(f"\nfrontiers, {title}: simfront's best tok/s/GPU at each measured Pareto point's tok/s/user, same GPU count, over measured")
            rows = [{"group": g, **v} for g, v in summ.items()]
            print_table(rows, ["group", ("points", "points"), ("reached", "reached"), ("geomean_ratio", "geomean pred/meas", "{:.2f}"),
                               ("class_agreement", "layout class agrees", "{:.0%}"),
                               ("class_and_drafting_agreement", "class and drafting agree", "{:.0%}"),
                               ("class_near", "class agrees or within 10 %", "{:.0%}"),
                               ("median_measured_class_share", "measured class's best / frontier", "{:.2f}"),
                               ("knee_class_agreement", "knee class agrees", "{:.0%}"),
                               ("at_load_geomean_ratio", "best at the measured load, pred/meas", "{:.2f}"),
                               ("geomean_ratio_same_drafting", "geomean pred/meas drafting as measured", "{:.2f}"),
                               ("geomean_ratio_to_sweep_interpolated", "pred / measured sweeps read as lines", "{:.2f}"),
                               ("outside_share", "simfront's best outside calibration layouts", "{:.0%}"),
                               ("geomean_ratio_inside", "geomean pred/meas where inside", "{:.2f}")])


def write_fidelity_html(fid: dict, path: str, title: str = "simfront: measured frontiers over predicted ones") -> None:
    """Measured Pareto points (markers) and simfront's best tok/s/GPU at the same tok/s/user, per group,
    on log axes: one offline page."""
    import plotly.graph_objects as go
    import plotly.io as pio

    fig = go.Figure()
    groups: dict[str, list] = {}
    for r in (fid.get("frontiers") or {}).get("points", []):
        groups.setdefault(f"{r['gpu']} {r['precision']} {r['isl']}/{r['osl']}", []).append(r)
    for name, rs in sorted(groups.items()):
        rs = sorted(rs, key=lambda r: r["measured_tok_s_user"])
        fig.add_trace(go.Scatter(x=[r["measured_tok_s_user"] for r in rs], y=[r["measured_tok_s_gpu"] for r in rs], mode="markers",
                                 name=f"measured {name}", text=[f"{r['num_gpus']} GPUs, {r['measured_class']}" for r in rs]))
        fig.add_trace(go.Scatter(x=[r["measured_tok_s_user"] for r in rs], y=[r["predicted_tok_s_gpu"] for r in rs],
                                 mode="lines+markers", line={"dash": "dot"}, name=f"predicted {name}",
                                 text=[f"predicted class {r['predicted_class']}" for r in rs]))
    fig.update_layout(title=title, xaxis={"title": "tok/s/user", "type": "log"}, yaxis={"title": "output tok/s/GPU", "type": "log"},
                      template="plotly_white")
    pio.write_html(fig, path, include_plotlyjs=True, full_html=True)
