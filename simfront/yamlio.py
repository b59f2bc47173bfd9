"""Reading simfront's own YAML data files fast: libyaml's C parser, and a cache of what it parsed.

``yaml.CSafeLoader`` parses the same documents into the same Python objects as ``yaml.SafeLoader``
(the tag resolver and constructors are shared; only the scanner and parser are C), about 15 times
faster: the hardware catalog took 0.22 s with the pure-Python loader and 0.014 s with this one.
PyYAML wheels ship libyaml; a build without it falls back to the pure-Python loader.

Even so, a ``predict`` parses about 30 documents (hardware, efficiency, kernel, scheduler and model
tables): ~25 ms of parsing plus ~15 ms to import PyYAML, on every command. So each parsed document
is kept in a per-user cache, keyed by the BLAKE2 hash of its text (an edited file has another key;
nothing goes stale), as :mod:`marshal` bytes, which load in microseconds and can only hold plain
data. PyYAML is imported only on a cache miss. Documents marshal cannot hold (a YAML date, say) are
parsed every time. The cache lives in ``$SIMFRONT_CACHE_DIR``, else ``$XDG_CACHE_HOME/simfront``, else
``~/.cache/simfront``; ``SIMFRONT_NO_CACHE=1`` turns it off. A cache that cannot be read or written
(a read-only home, a damaged entry) is the same as no cache: the text is parsed.
"""

from __future__ import annotations

import hashlib
import marshal
import os
import sys
from pathlib import Path
from typing import Any

# marshal's format is tied to the interpreter: one cache folder per marshal version and Python release
CACHE_SUBDIR = f"yaml-m{marshal.version}-py{sys.version_info[0]}{sys.version_info[1]}"
KEY_BYTES = 20  # BLAKE2b digest size of a document's text; the entry's file name


def loader() -> type:
    """PyYAML's safe (plain data only) loader: libyaml's C one where PyYAML was built with it."""
    import yaml  # only when a document is parsed: importing PyYAML costs more than reading a cached document

    return getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse(text: str) -> Any:
    """One YAML document, parsed with :func:`loader` (no cache: a user's file, or a cache miss)."""
    import yaml

    return yaml.load(text, Loader=loader())  # noqa: S506 (a safe loader)


def cache_dir() -> Path | None:
    """Folder of the parse cache, or None when ``SIMFRONT_NO_CACHE`` turns it off or there is no folder to use."""
    if os.environ.get("SIMFRONT_NO_CACHE", "").strip().lower() not in ("", "0", "false", "no"):
        return None
    root = os.environ.get("SIMFRONT_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        home = os.path.expanduser("~")
        if not xdg and home == "~":  # no home to put it in (expanduser gives "~" back): no cache, not one in the cwd
            return None
        root = os.path.join(xdg, "simfront") if xdg else os.path.join(home, ".cache", "simfront")
    return Path(root) / CACHE_SUBDIR


def loads(text: str) -> Any:
    """One YAML document from a string: from the cache when this exact text was parsed before."""
    folder = cache_dir()
    if folder is None:
        return parse(text)
    entry = folder / hashlib.blake2b(text.encode("utf-8"), digest_size=KEY_BYTES).hexdigest()
    try:
        return marshal.loads(entry.read_bytes())
    except (OSError, EOFError, ValueError, TypeError):  # no entry yet, or one that cannot be read back
        pass
    data = parse(text)
    try:
        blob = marshal.dumps(data)
    except ValueError:  # a type marshal cannot hold (e.g. a YAML date): parse this document every time
        return data
    try:  # write to a private name, then rename: a concurrent reader sees the whole entry or none
        folder.mkdir(parents=True, exist_ok=True)
        tmp = entry.with_name(f"{entry.name}.{os.getpid()}.tmp")
        try:
            tmp.write_bytes(blob)
            os.replace(tmp, entry)
        finally:
            tmp.unlink(missing_ok=True)
    except OSError:  # a read-only or full disk: work without the cache
        pass
    return data


def load(path: str | Path) -> Any:
    """One YAML document from a file."""
    return loads(Path(path).read_text(encoding="utf-8"))
