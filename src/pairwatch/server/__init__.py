"""The server's side of the books: ASGI and WSGI middleware for JSON-RPC servers.

One line wraps the application::

    app = pairwatch.PairwatchMiddleware(app)          # ASGI (Starlette, FastMCP, FastAPI...)
    app = pairwatch.PairwatchWSGIMiddleware(app)      # WSGI (Flask, waitress, gunicorn...)

Both keep the same books as a client integration, with the same metric names, labelled
``pairwatch.side="server"``: set against the client's view of the same server, a reply the
server sent but the client never got shows as lost in transit
(:func:`pairwatch.pairing.diagnosis.across_sides`, joined per batch by :class:`Crosscheck`).
"""

from __future__ import annotations

from pairwatch.server.asgi import PairwatchMiddleware
from pairwatch.server.crosscheck import Crosscheck, Verdict
from pairwatch.server.wsgi import PairwatchWSGIMiddleware

__all__ = ["Crosscheck", "PairwatchMiddleware", "PairwatchWSGIMiddleware", "Verdict"]
