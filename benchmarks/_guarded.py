"""A second floor for the fixed cost: pairwatch's checks on a healthy httpx exchange, written
as one function, with pairwatch's own metric recording.

Why: the minimal observer (``_observer.py``) shows what pairing by id costs, but pairwatch
owes more than that on every exchange, healthy or not: the off switch, suppression and
nesting checks, the class's method looked up per call (so a later ``mock.patch`` is
honoured), the id budget taken and released, a deadline from the client's read timeout, the
reply's status, Content-Type, charset and Content-Encoding judged, and the batch recorded
into OpenTelemetry exactly.  This observer makes those checks with as few Python calls as
they can be made (one frame for the whole exchange, pairwatch's helpers only where each is a
single look-up), and records through pairwatch's sink, so its exported series are the very
ones pairwatch exports.  Whatever it costs above bare, pairwatch's guarantees cost at least
that in Python, however its modules were arranged; what pairwatch costs above it is what its
arrangement costs (the general path it can hand over to at any step, the modules' own
frames).

It is not a pairing observer anyone should run: it hands every unusual exchange (a redirect,
a 202, a body that does not pair, a method timeout, captured payloads, spans) to nothing, and
says so by counting it in ``declined``; the benchmark stops if more than the first exchange
was declined, since a floor that skipped its work would be no floor.
"""

from __future__ import annotations

import math
import sys
import time
import types
from typing import Any

import wrapt

from pairwatch.channel import Options
from pairwatch.channel.parts import exchange_parts
from pairwatch.integrations._kit.exchange import ACTIVE
from pairwatch.integrations._kit.request import REDIRECTS
from pairwatch.integrations._kit.stream import plain_body
from pairwatch.integrations.httpx_client import _wanted_headers
from pairwatch.otel.sdk.context import get_current, suppressed
from pairwatch.pairing import _fast
from pairwatch.pairing.closing import settle
from pairwatch.pairing.limits import process_budget
from pairwatch.pairing.records import Batch
from pairwatch.runtime import switch


class Guarded:
    """The counts that keep the floor honest: exchanges recorded, and exchanges declined."""

    __slots__ = ("declined", "recorded")

    def __init__(self) -> None:
        self.recorded = 0
        self.declined = 0

    def check(self) -> None:
        """Stop the run unless every exchange but the first was recorded (the first may meet
        a Content-Type not seen before, which the observer learns, as a tap would)."""
        if self.declined > 1 or not self.recorded:
            raise RuntimeError(
                f"the guarded observer recorded {self.recorded} exchanges and declined "
                f"{self.declined}: its row would not be a floor"
            )


def guarded_observer(client: Any, options: Options, counts: Guarded) -> Any:
    """Wrap ``client.send`` (an httpx ``Client``), counting into ``counts``; returns it."""
    budget = process_budget()
    kind = type(client)

    def observe(wrapped: Any, instance: Any, args: Any, kwargs: Any) -> Any:
        found = kind.__dict__.get("send")  # the class's method now: a later patch is seen
        mock = sys.modules.get("unittest.mock")
        if (
            type(found) is not types.FunctionType
            or not switch.on
            or (mock is not None and isinstance(getattr(found, "mock", None), mock.NonCallableMock))
        ):
            counts.declined += 1
            return wrapped(*args, **kwargs)
        original = types.MethodType(found, instance)
        current = get_current()
        if (current and suppressed(current)) or ACTIVE.get():
            counts.declined += 1
            return original(*args, **kwargs)
        try:
            request = args[0]
            sent = _fast.plain(request.content, "request")
            plain = None if sent is None else sent.plain
            parts = exchange_parts(options, "httpx", request.url.host)
            limits, sink = parts.limits, parts.sink
            if (
                sent is None
                or plain is None
                or options.capture_payloads
                or parts.telemetry.spans
                or sink.on_closed is not None
                or sink.capture is not None
                or limits.method_timeouts
                or (options.propagate and current)
            ):
                counts.declined += 1
                return original(*args, **kwargs)
            keys = plain.keys
            n = len(keys)
            if (
                not n
                or n > limits.max_pending_ids
                or (n > 1 and len(set(keys)) != n)
                or not budget.take_all(n)
            ):
                counts.declined += 1
                return original(*args, **kwargs)
            timeouts = request.extensions.get("timeout")
            read = timeouts.get("read") if isinstance(timeouts, dict) else None
            push = None if read is None or not math.isfinite(read) else float(read)
            sent_at = time.monotonic()
            deadline = sent_at + (limits.timeout if push is None else push)
        except Exception:
            counts.declined += 1
            return original(*args, **kwargs)
        token = ACTIVE.set(True)
        try:
            response = original(*args, **{**kwargs, "stream": True})
            response.read()
        finally:  # the ids go back to the budget however the call ends
            ACTIVE.reset(token)
            budget.release(n)
        try:
            content_type, encoding, location = _wanted_headers(response.headers)
            status = response.status_code
            body = response.content
            got = None
            if not encoding and status != 202 and not (status in REDIRECTS and location):
                seen = plain_body(body, content_type)
                if seen is not None and seen.as_bytes:
                    got = _fast.plain(body, "result")
            now = time.monotonic()
            if push is not None and now + push > deadline:
                deadline = now + push
            if (
                got is not None
                and got.plain is not None
                and got.is_batch is sent.is_batch
                and now <= deadline
                and got.plain.keys == keys
            ):
                batch = Batch(sent.is_batch, n, keys, plain.methods or [], sent_at)
                batch.timeout = deadline - sent_at
                batch.answered_by(keys, now)
                settle(batch, "body_end", now, [])
                sink.batch_closed(batch)
                counts.recorded += 1
            else:
                counts.declined += 1
        except Exception:
            counts.declined += 1
        return response

    wrapt.wrap_function_wrapper(client, "send", observe)
    return client
