"""What the equivalence tests compare of a closed batch: its fields by name, sequences as
lists (a path may keep ids or receive times in a tuple or a list; the values are the
contract, not the container)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SEQUENCES = frozenset({"keys", "methods", "received"})


def batch_fields(batch: Any, names: Iterable[str]) -> dict[str, Any]:
    found = {name: getattr(batch, name) for name in names}
    for name in SEQUENCES.intersection(found):
        found[name] = list(found[name])
    return found
