"""What one HTTP client library tells the exchange skeleton: :class:`HttpClient`.

Split from the skeleton (:mod:`pairwatch.integrations._kit.exchange`, which re-exports it) so
that each module has one job: this one says what an integration must describe about its
library (where the request is, how to tap or read the response); the skeleton says when
each step runs.
"""

from __future__ import annotations

from typing import Any

from pairwatch.integrations._kit.calls import Args, Kwargs
from pairwatch.integrations._kit.request import (
    Exchange,
    Request,
    Streamed,
    decoded_payload,
    request_payload,
)
from pairwatch.integrations._kit.stream import Tap
from pairwatch.pairing import wire

__all__ = ["HttpClient", "Reply"]

Reply = tuple[str | None, object, object]
"""A buffered response's Content-Type, status and Location, as :meth:`HttpClient.reply`
gives them."""


class HttpClient:
    """What one HTTP client library tells the skeleton; subclasses fill in the blanks.

    ``stream_flag``: set when the library reads a buffered body inside its send.  The
    skeleton then sends with ``stream_flag=streaming`` (``stream=True`` for httpx and
    requests, ``preload_content=False`` for urllib3) so the body can be tapped before anyone
    reads it, and calls :meth:`read` (or :meth:`aread`) for a caller who did not ask for a
    stream, as the library would have.
    """

    integration = "http"
    stream_flag: str | None = None
    streaming: object = True
    # A buffered body the library keeps once read (requests' ``content``): the skeleton
    # reads it as the library would and shows it whole (:meth:`reply`, :meth:`body`)
    # instead of teeing the response's reads (httpx, requests).
    reads_whole = False

    def request(self, instance: Any, args: Args, kwargs: Kwargs) -> Request | None:
        """Where the request body and URL are in this call; None when there is no body."""
        raise NotImplementedError

    def payload(self, request: Request) -> wire.Payload | None:
        """The JSON-RPC payload of the body, or None when it is not JSON-RPC."""
        if request.parsed is not None:
            return request.parsed
        if request.decoded:
            return decoded_payload(request.body)
        return request_payload(request.body)

    def attach(
        self, exchange: Exchange, response: Any, instance: Any, kwargs: dict[str, Any]
    ) -> Tap | None:
        """Show the response body to a tap (or to a stand-in that builds one on need,
        :class:`~pairwatch.integrations._kit.tap_on_need.TapOnNeed`).  Return a tap for the
        skeleton to watch the response with while the body is still to come; None when
        there is none, or when it watches the response already."""
        raise NotImplementedError

    def stream_request(
        self, instance: Any, args: Args, kwargs: Kwargs, streamed: Streamed
    ) -> Request | None:
        """For a request whose body is a stream: let ``streamed`` see it as it is sent and
        say where it goes; None when the library (or this body) offers no such view."""
        return None

    def reply(self, exchange: Exchange, response: Any) -> Reply:
        """A buffered response's Content-Type, status and Location (``reads_whole`` only)."""
        raise NotImplementedError

    def body(self, response: Any) -> bytes:
        """The body :meth:`read` has read, decoded as the caller gets it (``reads_whole``)."""
        raise NotImplementedError

    def read(self, response: Any) -> None:
        """Read a buffered body the way the library's own send does (``stream_flag`` only)."""

    async def aread(self, response: Any) -> None:
        """:meth:`read` for a coroutine send."""
