"""The hostile peer for the session (see peer.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

from components import need  # noqa: E402
from peer import BOMB_BYTES, ENCODINGS, Peer, make_bomb  # noqa: E402

INSTALL = "pip install 'pairwatch[test]' (brotli, backports.zstd)"


@pytest.fixture(scope="session")
def peer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Peer]:
    need("brotli", INSTALL)
    need("compression.zstd" if sys.version_info >= (3, 14) else "backports.zstd", INSTALL)
    where = tmp_path_factory.mktemp("bombs")
    bombs = {enc: make_bomb(enc, BOMB_BYTES, where / f"bomb.{enc}") for enc in ENCODINGS}
    server = Peer(bombs)
    yield server
    server.close()
