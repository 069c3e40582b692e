"""The channel API every integration (and any hand-written client) feeds, and where a closed
batch goes from there.

* :mod:`~pairwatch.channel.channel`: :class:`Channel`, the three calls (``sent``,
  ``received``, ``close``) over one channel's books, every one shielded;
  :func:`open_channel` for clients no integration covers.
* :mod:`~pairwatch.channel.parts`: what a channel is built from, looked up once per options
  object (an HTTP client opens one channel per exchange).
* :mod:`~pairwatch.channel.sink`: the one entry from a closed batch into telemetry, the
  user's ``on_batch_closed`` hook and the diagnosis log.
"""

from pairwatch.channel.channel import Channel, open_channel
from pairwatch.options import Options

__all__ = ["Channel", "Options", "open_channel"]
