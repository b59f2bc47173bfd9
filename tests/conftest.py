"""Session setup shared by every test module."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(autouse=True, scope="session")
def _private_parse_cache(tmp_path_factory):
    """simfront's YAML parse cache (simfront.yamlio) in a folder of this session, inherited by the CLI
    subprocesses the tests start, so that tests neither read nor write the user's cache."""
    old = os.environ.get("SIMFRONT_CACHE_DIR")
    os.environ["SIMFRONT_CACHE_DIR"] = str(tmp_path_factory.mktemp("simfront-cache"))
    yield
    if old is None:
        os.environ.pop("SIMFRONT_CACHE_DIR", None)
    else:
        os.environ["SIMFRONT_CACHE_DIR"] = old
