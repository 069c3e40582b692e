"""The equivalence tests: where two implementations (or two representations) of one rule
exist, each test runs the same cases both ways and compares what a user reads.

They borrow the HTTP tests' scripted loopback server.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "integrations"))


@pytest.fixture(scope="session")
def scripted() -> Iterator[str]:
    """The scripted stdlib server of ``http_drivers`` (exact bytes per path); imported here,
    so the SDK range job runs the SDK files without the HTTP clients installed."""
    from http_drivers import serve_scripted

    with serve_scripted() as url:
        yield url
