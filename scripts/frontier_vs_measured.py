"""Predicted frontiers against measured frontiers, and the residual trends by knob.

The same checks as ``simfront validate FILE --frontier`` (:mod:`simfront.fidelity`), as a script whose
output is quoted in closing notes: for each sweep of a measured-point file (GPU, precision, ISL/OSL,
mode), simfront's best tok/s/GPU at each measured Pareto point's tok/s/user on the same GPU count over
the measured one, the layout-class agreement, and the median predicted/measured by knob bin.

    python scripts/frontier_vs_measured.py [FILE] [--json out.json] [--fit-on OTHER.csv]

FILE defaults to measurements/inferencemax_b200_h100.csv, the repository's copy of
../shared/calibration/e2e/inferencemax_b200_h100.csv with its sidecar of what the runs' recipes set
(measurements/inferencemax_b200_h100.simfront.yaml), as calibrate_serving.py reads it.
With the shipped profile, FILE's rows may be among those the serving profile was fitted on
(``scripts/calibrate_serving.py`` fits on measurements/measured_serving.csv and
inferencemax_b200_h100.csv); ``--fit-on OTHER.csv`` first fits the serving profile on OTHER.csv alone
(same fitter) and predicts FILE with it, so the figures are out of source.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from simfront import api  # noqa: E402
from simfront.report_fidelity import print_fidelity  # noqa: E402

DEFAULT_FILE = ROOT / "measurements" / "inferencemax_b200_h100.csv"  # the calibration file, with its sidecar of recipe facts


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file", nargs="?", default=str(DEFAULT_FILE))
    ap.add_argument("--json", dest="json_out", default=None)
    ap.add_argument("--fit-on", default=None, help="fit the serving profile on this measured file alone first (out-of-source figures)")
    args = ap.parse_args()
    t0 = time.perf_counter()
    profile = None
    if args.fit_on:
        from simfront.calibration import Fitter
        from simfront.ingest import load_measurements

        profile = {"serving": Fitter(load_measurements([args.fit_on]).points).fit()}
        print(f"serving profile fitted on {args.fit_on} alone ({time.perf_counter() - t0:.0f} s)")
    from simfront import efficiency

    with efficiency.using(profile):
        res = api.validate([args.file], frontier=True)
    fid = res["fidelity"]
    print(f"{args.file}: {res['serving']['summary']['predicted_rows']} rows predicted ({time.perf_counter() - t0:.0f} s)")
    print_fidelity(fid)
    if args.json_out:
        Path(args.json_out).write_text(json.dumps(fid, indent=1, default=api.json_default))


if __name__ == "__main__":
    main()
