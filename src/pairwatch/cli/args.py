"""Argument types with ranges, and a parser whose errors fit on one line.

A command-line mistake deserves one line that names the argument, the value and what is
allowed, with exit status 2 (argparse's convention for usage errors), not a traceback from
deep inside the server or a usage block that pushes the actual error off the screen.  The
types check ranges when the argument is parsed, so nothing downstream ever sees ``--rate -1``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import NoReturn


class OneLineParser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors are a single line on stderr, status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def fail(prog: str, message: str) -> int:
    """Report a usage problem found after parsing (a busy port) the same way, return 2."""
    print(f"{prog}: error: {message}", file=sys.stderr)
    return 2


def number(
    kind: Callable[[str], float] | Callable[[str], int],
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> Callable[[str], float]:
    """An argparse type: parse with ``kind`` and require ``low <= value <= high``.

    ``low_open`` excludes the lower bound (a rate must be above 0, not at it).
    """

    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            name = "an integer" if kind is int else "a number"
            raise argparse.ArgumentTypeError(f"{text!r} is not {name}") from None
        if value != value or value in (float("inf"), float("-inf")):  # NaN / infinities
            raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
        if low is not None and (value < low or (low_open and value == low)):
            bound = f"above {low:g}" if low_open else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"{text} is out of range: must be {bound}")
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"{text} is out of range: must be at most {high:g}")
        return value

    parse.__name__ = kind.__name__  # argparse names the type in some messages
    return parse


PORT = number(int, low=0, high=65535)
PROBABILITY = number(float, low=0.0, high=1.0)
