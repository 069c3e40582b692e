"""Language servers: the same books for LSP sessions.

* :mod:`.framed`: one session's tap (both byte streams, framed by the one
  ``Content-Length`` parser, fed to one stream channel) and the tee stand-ins;
* :mod:`.pygls_client`: ``pairwatch.instrument(client)`` for pygls's ``LanguageClient``;
* :mod:`.streams`: ``pairwatch.instrument_streams(reader, writer)`` for any framed byte
  stream pair, and python-lsp-jsonrpc's ``JsonRpcStreamReader``/``JsonRpcStreamWriter``;
* :mod:`.multilspy_client`: ``pairwatch.instrument(lsp)`` for multilspy's servers;
* :mod:`.pylsp_client`: what ``pairwatch.instrument`` says about a python-lsp-jsonrpc object.
"""
