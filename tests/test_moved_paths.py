"""Modules that moved in 0.2 keep their old import paths for one minor release: the same
module object, with a DeprecationWarning that names the new path."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

import pairwatch
from pairwatch._moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_gives_the_module_at_the_new_one_and_warns(old: str) -> None:
    sys.modules.pop(old, None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        module = importlib.import_module(old)
    assert module is importlib.import_module(MOVED[old])
    messages = [str(w.message) for w in caught if w.category is DeprecationWarning]
    assert messages == [f"{old} moved to {MOVED[old]}; the old path goes in pairwatch 0.3"]
    assert caught[0].filename == __file__  # the warning points at the importer


def test_the_old_paths_still_import_by_name_in_a_fresh_process() -> None:
    code = (
        "import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
        "import pairwatch\n"
        "try:\n"
        "    from pairwatch import guard\n"
        "except DeprecationWarning as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout.strip() == (
        "pairwatch.guard moved to pairwatch.runtime.guard; the old path goes in pairwatch 0.3"
    )


def test_the_public_face_did_not_move() -> None:
    """What the README names imports without a warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        from pairwatch.channel import Channel, Options, open_channel
        from pairwatch.endpoint import MetricsEndpoint
        from pairwatch.instrumentor import PairwatchInstrumentor
        from pairwatch.pairing.records import Batch
        from pairwatch.server import Crosscheck

    assert Channel is pairwatch.Channel
    assert Options is pairwatch.Options
    assert open_channel is pairwatch.open_channel
    assert {MetricsEndpoint, PairwatchInstrumentor, Batch, Crosscheck}
