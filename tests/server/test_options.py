"""The middleware reads its settings as ``pairwatch.instrument`` reads a client's."""

from __future__ import annotations

import pairwatch
from pairwatch import Options


def _app(scope, receive, send):  # never called: only the settings are read
    raise AssertionError


def test_environment_settings_apply_and_keywords_win(monkeypatch):
    monkeypatch.setenv("PAIRWATCH_TIMEOUT", "7.5")
    monkeypatch.setenv("PAIRWATCH_METHOD_CAP", "9")
    asgi = pairwatch.PairwatchMiddleware(_app, method_cap=4)
    wsgi = pairwatch.PairwatchWSGIMiddleware(_app)
    assert (asgi.options.timeout, asgi.options.method_cap) == (7.5, 4)
    assert (wsgi.options.timeout, wsgi.options.method_cap) == (7.5, 9)


def test_explicit_options_are_kept_with_keyword_overrides(monkeypatch):
    monkeypatch.setenv("PAIRWATCH_TIMEOUT", "7.5")
    base = Options(timeout=2.0, spans=False)
    app = pairwatch.PairwatchMiddleware(_app, options=base, method_cap=3)
    assert (app.options.timeout, app.options.spans, app.options.method_cap) == (2.0, False, 3)
    assert pairwatch.PairwatchWSGIMiddleware(_app, options=base).options is base
