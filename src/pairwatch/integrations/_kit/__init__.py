"""What every integration is built from, so that none writes its own.

* :mod:`.patch`: the one patcher (install, exact restore, the original looked up when
  called, pass-through when switched off, suppressed, or mocked);
* :mod:`.exchange`: the one skeleton of an HTTP exchange, driving the same steps for a
  blocking and a coroutine send; an HTTP library describes itself in a
  :class:`~.client.HttpClient`; the exchange itself (a bound channel and its request) is in
  :mod:`.request`;
* :mod:`.stream`: the response-body tap (and the one function for a body read whole);
  :mod:`.tap_on_need`: a stand-in that builds a tap only when a body needs one;
  :mod:`.sse`: the event-stream parser; :mod:`.decoders` and :mod:`.body`: the library's
  own content decoders and charset for pairwatch's copy, and the process budget of
  buffered bytes; :mod:`.watch`: the responses callers hold open;
* :mod:`.urllib3` and :mod:`.ws`: the tees of a urllib3 response and a websocket;
* :mod:`.calls`: hooks around a call on a stream, written once for plain and coroutine
  methods.
"""
