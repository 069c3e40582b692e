"""``pairwatch audit FILE...``: the live counters and diagnoses, from captured traffic.

Exit statuses: 0 when every ``--fail-on`` rule holds (or none is given), 1 when a rule is
breached, 2 when a capture cannot be read or the arguments are wrong, 3 when a capture lacks
the bodies of some exchanges (recorded with content omitted, or its side files are not
there): a gate must not pass on counts that leave those exchanges out, and "no traffic
found" would be a lie.  A capture error is one line naming the file and the line or entry,
never a traceback: the command runs in CI.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Iterator
from typing import IO, Any

from pairwatch.audit import FORMATS, CaptureError, FileAudit, audit_file
from pairwatch.audit.base import Progress
from pairwatch.audit.report import (
    Threshold,
    absence_message,
    build,
    parse_threshold,
    to_json,
    to_text,
)

EPILOG = """\
formats: HAR (.har, or a .zip HAR archive: browser devtools, Playwright, mitmproxy),
JSON Lines (.jsonl: one {"ts", "dir": "sent"|"received"|"closed", "channel",
"message"|"raw"} per line) and stdio transcripts ('> ' sent / '< ' received, one
message per line, optional leading time).
--fail-on NAME OP N (OP: > >= < <= == !=), NAME one of: batches, requests, missing,
unknown_id, null_id, count_mismatch, duplicate_id, invalid_response, invalid_request,
out_of_order, protocol_violation, internal_errors, not_ok (or the metric name).
HAR side files: bodies a HAR points at ("_file", Playwright's content "attach") are read
from the HAR's directory, or from the .zip archive that holds the HAR.
exit status: 0 ok, 1 a --fail-on rule was breached, 2 unreadable capture or bad arguments,
3 a capture lacks bodies (recorded with content omitted, or side files missing).
"""


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "audit",
        help="pair the JSON-RPC traffic of captures (HAR or HAR .zip, JSON Lines, stdio)",
        description="Feed captured JSON-RPC traffic through pairwatch's ledger and report.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("files", nargs="+", metavar="FILE", help="capture files")
    parser.add_argument(
        "--format", choices=sorted(FORMATS), help="capture format (default: by name or content)"
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument(
        "--prometheus", metavar="FILE", help="write the counters in Prometheus text format"
    )
    parser.add_argument(
        "--fail-on",
        action="append",
        default=[],
        type=_rule,
        metavar="RULE",
        help="exit 1 when RULE holds for the totals, e.g. missing>0 or unknown_id>=3",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=30.0,
        help="seconds a batch may wait before its pending ids count as missing (default 30)",
    )
    parser.add_argument("--worst", type=int, default=5, help="worst batches listed per file")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    parser.set_defaults(handler=run)


def _rule(text: str) -> Threshold:
    try:
        return parse_threshold(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class ProgressBar:
    """A one-line bar on a terminal's stderr, redrawn at most ten times a second.

    Polls the reader's byte count from a daemon thread, so the reading loop pays nothing.
    """

    def __init__(self, stream: IO[str], label: str, progress: Progress) -> None:
        self._stream = stream
        self._label = label if len(label) <= 40 else "..." + label[-37:]
        self._progress = progress
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pairwatch-progress", daemon=True)

    def __enter__(self) -> ProgressBar:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._stream.write("\r\x1b[K")
        self._stream.flush()

    def _run(self) -> None:
        while not self._stop.wait(0.1):
            total = self._progress.total or 1
            frac = min(self._progress.done / total, 1.0)
            filled = int(frac * 30)
            self._stream.write(f"\r{self._label} [{'#' * filled}{'.' * (30 - filled)}] {frac:4.0%}")
            self._stream.flush()


def _audit(path: str, args: argparse.Namespace, show_progress: bool) -> FileAudit:
    progress = Progress(0)
    kwargs: dict[str, Any] = {"timeout": args.timeout, "keep_worst": args.worst}
    if not show_progress:
        return audit_file(path, args.format, progress=progress, **kwargs)
    with ProgressBar(sys.stderr, os.path.basename(path), progress):
        return audit_file(path, args.format, progress=progress, **kwargs)


@contextlib.contextmanager
def _quiet_diagnosis_log() -> Iterator[None]:
    """The live path logs each non-ok diagnosis; in an audit the report says it all."""
    logger = logging.getLogger("pairwatch")
    propagate = logger.propagate
    handler = logging.NullHandler()
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate


def run(args: argparse.Namespace) -> int:
    with _quiet_diagnosis_log():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    show_progress = not args.no_progress and sys.stderr.isatty()
    started = time.monotonic()
    audits: list[FileAudit] = []
    try:
        for path in args.files:
            audits.append(_audit(path, args, show_progress))
    except CaptureError as exc:
        print(f"pairwatch audit: error: {exc}", file=sys.stderr)
        return 2
    report = build(audits, args.fail_on)
    report["elapsed_seconds"] = round(time.monotonic() - started, 3)
    if args.prometheus:
        from pairwatch.audit.prom import write

        try:
            write(args.prometheus, audits)
        except OSError as exc:
            print(f"pairwatch audit: error: {args.prometheus}: {exc.strerror}", file=sys.stderr)
            return 2
    sys.stdout.write(to_json(report) + "\n" if args.json else to_text(report))
    for f in report["files"]:
        absence = absence_message(f)
        if absence is not None:
            print(f"pairwatch audit: {f['path']}: {absence}", file=sys.stderr)
    status: int = report["status"]
    return status
