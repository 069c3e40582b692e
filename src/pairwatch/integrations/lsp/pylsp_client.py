"""python-lsp-jsonrpc objects handed to ``pairwatch.instrument`` one at a time.

Why a refusal: a ``JsonRpcStreamReader`` sees only replies and a ``JsonRpcStreamWriter`` only
requests; pairing needs both on one channel.  ``TypeError`` at set-up names the one line
that works (:mod:`pairwatch.integrations.lsp.streams`).
"""

from __future__ import annotations

from pairwatch.channel import Options
from pairwatch.integrations import Handle

__all__ = ["install"]


def install(obj: object, options: Options) -> Handle:
    raise TypeError(
        f"pairwatch pairs python-lsp-jsonrpc's reader and writer together, not a "
        f"{type(obj).__qualname__} alone: "
        "reader, writer = pairwatch.instrument_streams(reader, writer)"
    )
