"""examples/gunicorn_conf.py: each worker gets the first free metrics port of a fixed range,
and a restarted worker takes the port its predecessor freed (so its series keep their
``instance`` label and Prometheus reads the restart as a counter reset)."""

from __future__ import annotations

import importlib.util
import socket
from pathlib import Path

import pytest

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gunicorn_conf.py"


def load():
    spec = importlib.util.spec_from_file_location("gunicorn_conf", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def free_pair() -> int:
    """A base port whose next port is free too (checked by binding both)."""
    for _ in range(50):
        with socket.socket() as a:
            a.bind(("127.0.0.1", 0))
            base = a.getsockname()[1]
            with socket.socket() as b:
                try:
                    b.bind(("127.0.0.1", base + 1))
                except OSError:
                    continue
                return int(base)
    raise RuntimeError("no two consecutive free ports")


def test_workers_take_the_first_free_ports_and_a_restart_reuses_one():
    conf = load()
    base = free_pair()
    first = conf.serve_on_first_free_port(base, 2)
    second = conf.serve_on_first_free_port(base, 2)
    try:
        assert (first.port, second.port) == (base, base + 1)
        with pytest.raises(OSError, match="no free metrics port"):
            conf.serve_on_first_free_port(base, 2)
        first.close()  # the worker on the first port dies
        replacement = conf.serve_on_first_free_port(base, 2)
        assert replacement.port == base
        replacement.close()
    finally:
        first.close()
        second.close()
