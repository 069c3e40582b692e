"""The two test applications: a Starlette JSON-RPC app (ASGI) and a plain WSGI app.

Both answer by :func:`server_support.answer_body`.  ``?reverse=1`` returns a batch reply in
reverse order, ``?object=1`` answers a batch with its first reply alone, ``?boom=1`` raises
after reading the body, ``/sse`` answers as an event stream, one reply per event
(``/sse?cut=1``: the stream breaks after its first event).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterable
from typing import Any

from server_support import answer_body


def starlette_app() -> Any:
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response, StreamingResponse
    from starlette.routing import Route

    async def rpc(request: Request) -> Response:
        body = await request.body()
        q = request.query_params
        if q.get("boom"):
            raise RuntimeError("the application failed")
        reply = answer_body(body, reverse=bool(q.get("reverse")), as_object=bool(q.get("object")))
        if not reply:
            return Response(status_code=202)
        return Response(reply, media_type="application/json")

    async def sse(request: Request) -> Response:
        body = await request.body()
        reply = answer_body(body)
        items: list[Any] = []
        if reply:
            value = json.loads(reply)
            items = value if isinstance(value, list) else [value]

        cut = bool(request.query_params.get("cut"))

        async def events() -> AsyncIterator[bytes]:
            for item in items:
                yield b"event: message\r\ndata: " + json.dumps(item).encode() + b"\r\n\r\n"
                if cut:
                    raise RuntimeError("the stream broke after its first event")

        return StreamingResponse(events(), media_type="text/event-stream")

    async def health(request: Request) -> Response:
        return Response(b"ok")

    return Starlette(
        routes=[
            Route("/", rpc, methods=["POST"]),
            Route("/sse", sse, methods=["POST"]),
            Route("/health", health, methods=["GET", "POST"]),
        ]
    )


def wsgi_app(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    length = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(length)
    query = environ.get("QUERY_STRING", "")
    if environ.get("PATH_INFO") == "/health":
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]
    if "boom=1" in query:
        raise RuntimeError("the application failed")
    reply = answer_body(body, reverse="reverse=1" in query, as_object="object=1" in query)
    if not reply:
        start_response("202 Accepted", [("Content-Length", "0")])
        return [b""]
    if "chunks=1" in query:  # the reply in three pieces, as a generator
        start_response("200 OK", [("Content-Type", "application/json")])
        third = len(reply) // 3
        return (part for part in (reply[:third], reply[third : 2 * third], reply[2 * third :]))
    start_response(
        "200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(reply)))]
    )
    return [reply]
