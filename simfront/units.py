"""Unit constants. SI inside simfront; friendly units only at the edges (CLI, tables, plots)."""

KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
KiB = 1024.0
MiB = 1024.0**2
GiB = 1024.0**3
TiB = 1024.0**4

TFLOPS = 1e12  # FLOP/s
PFLOPS = 1e15

US = 1e-6  # seconds per microsecond
MS = 1e-3  # seconds per millisecond

SECONDS_PER_HOUR = 3600.0
TOKENS_PER_MTOK = 1e6
