"""The ``pairwatch`` command as a new user meets it: --version, --help, mistakes, a busy port.

Every case runs the real command in a subprocess and reads what a user reads: the exit
status, stdout and stderr.  A usage mistake must be one line on stderr with status 2 and no
traceback, whatever the argument.
"""

from __future__ import annotations

import errno
import re
import socket
import subprocess
import sys
import time

import pytest

import pairwatch
from pairwatch.chaos import KINDS

COMMAND = [sys.executable, "-m", "pairwatch"]


def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL
    )


def test_version_prints_the_package_version():
    done = run("--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"pairwatch {pairwatch.__version__}\n"


def test_demo_help_lists_every_fault_kind_without_rst_markup():
    done = run("demo", "--help")
    assert done.returncode == 0, done.stderr
    text = done.stdout
    for kind in KINDS:
        assert re.search(rf"\b{kind}\b", text), kind
    for markup in ("``", ":mod:", ":func:", ":class:"):
        assert markup not in text
    for flag in ("--duration", "--faults", "--rate", "--batch-size", "--metrics-port"):
        assert flag in text


BAD_ARGUMENTS = [
    (["--faults", "nonsense=2"], "unknown fault kind 'nonsense'"),
    (["--faults", "drop=2"], "probability for drop: 2 is out of range: must be at most 1"),
    (["--faults", "drop=-0.1"], "must be at least 0"),
    (["--faults", "drop=often"], "'often' is not a number"),
    (["--faults", "drop:speed=3=0.5"], "unknown fault parameter 'speed'"),
    (["--faults", "reorder:mode=sideways=0.5"], "mode 'sideways' is not valid for reorder"),
    (["--metrics-port", "99999"], "99999 is out of range: must be at most 65535"),
    (["--metrics-port", "-1"], "-1 is out of range: must be at least 0"),
    (["--port", "70000"], "70000 is out of range"),
    (["--rate", "-1"], "-1 is out of range: must be above 0"),
    (["--rate", "0"], "0 is out of range: must be above 0"),
    (["--rate", "nan"], "'nan' is not a finite number"),
    (["--batch-size", "0"], "0 is out of range: must be at least 1"),
    (["--batch-size", "2.5"], "'2.5' is not an integer"),
    (["--duration", "-5"], "-5 is out of range: must be at least 0"),
    (["--client-bug", "1.5"], "1.5 is out of range: must be at most 1"),
    (["--timeout", "0"], "0 is out of range: must be above 0"),
    (["--no-such-flag"], "unrecognized arguments: --no-such-flag"),
]


@pytest.mark.parametrize(
    ("args", "message"), BAD_ARGUMENTS, ids=lambda v: " ".join(v) if isinstance(v, list) else None
)
def test_a_bad_demo_argument_is_one_line_and_status_2(args, message):
    done = run("demo", *args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    # argparse reports arguments it does not know at the top-level command
    assert re.match(r"pairwatch( demo)?: error: ", lines[0]), lines[0]
    assert message in lines[0], lines[0]
    assert "Traceback" not in done.stderr


def test_an_unknown_command_is_one_line_and_status_2():
    done = run("nonsense")
    assert done.returncode == 2
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert "invalid choice: 'nonsense'" in done.stderr


def listening(port: int) -> socket.socket | None:
    """A socket listening on 127.0.0.1:port, or None when someone else already holds it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
    except OSError as e:
        sock.close()
        if e.errno != errno.EADDRINUSE:
            raise
        return None
    sock.listen()
    return sock


def test_a_busy_metrics_port_given_explicitly_says_so_and_how_to_pick_another():
    holder = listening(0)
    assert holder is not None
    port = holder.getsockname()[1]
    try:
        done = run("demo", "--duration", "1", "--plain", "--metrics-port", str(port))
    finally:
        holder.close()
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (
        f"pairwatch demo: error: metrics port {port} on 127.0.0.1 is in use; pick another "
        "with --metrics-port P, or --metrics-port 0 for any free port\n"
    )


def test_a_busy_chaos_port_says_so():
    holder = listening(0)
    assert holder is not None
    port = holder.getsockname()[1]
    try:
        done = run("demo", "--duration", "1", "--plain", "--metrics-port", "0", "--port", str(port))
    finally:
        holder.close()
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr == (
        f"pairwatch demo: error: chaos server port {port} is in use; pick another with --port P\n"
    )


def test_an_address_that_cannot_be_bound_is_one_line():
    done = run("demo", "--duration", "1", "--plain", "--metrics-addr", "no-such-host.invalid")
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("pairwatch demo: error: cannot serve metrics on ")


def test_the_default_metrics_port_when_busy_falls_back_to_a_free_one_and_says_which():
    holder = listening(9464)  # None: another process holds it, which is just as busy
    try:
        proc = subprocess.Popen(
            [*COMMAND, "demo", "--duration", "2", "--plain", "--faults", "none"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out, err = proc.communicate(timeout=60)
    finally:
        if holder is not None:
            holder.close()
    assert proc.returncode == 0, out + err
    first = out.splitlines()[0]
    found = re.search(
        r"metrics http://127\.0\.0\.1:(\d+)/metrics \(port 9464 is in use, so the metrics are "
        r"on port (\d+)\)",
        first,
    )
    assert found, first
    assert found.group(1) == found.group(2) != "9464"
    assert "every counter agrees." in out


def test_a_live_terminal_frame_redraws_in_place_and_wraps_at_words():
    """Under a pseudo-terminal the view homes the cursor and clears lines instead of
    scrolling, shows elapsed and remaining time, and names the window of its reading."""
    import os
    import pty

    main, child = pty.openpty()
    env = {**os.environ, "COLUMNS": "60", "LINES": "40"}
    proc = subprocess.Popen(
        [
            *COMMAND,
            "demo",
            "--duration",
            "2.5",
            "--metrics-port",
            "0",
            "--faults",
            "drop=0.5,wrong_id=0.5",
        ],
        stdin=child,
        stdout=child,
        stderr=child,
        env=env,
        close_fds=True,
    )
    os.close(child)
    chunks = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            data = os.read(main, 65536)
        except OSError:
            break  # the child closed the terminal
        if not data:
            break
        chunks.append(data)
    os.close(main)
    assert proc.wait(timeout=30) == 0
    text = b"".join(chunks).decode("utf-8", "replace")
    frames = text.split("\x1b[H")[1:]
    assert len(frames) >= 2, text[:500]
    assert text.count("\x1b[2J") == 1  # cleared once; later frames overwrite in place
    last = frames[-1]
    assert "\x1b[K" in last
    assert "\x1b[J" in last
    assert re.search(r"elapsed +\d+\.\d s +remaining +\d+\.\d s", last), last
    assert re.search(r"reading, last \d+ s: ", last), last
    body = last.split("pairwatch demo summary")[0].replace("\x1b[K", "").replace("\x1b[J", "")
    reading = body[body.index("  reading, last") :].split("Ctrl-C")[0].rstrip().splitlines()
    assert len(reading) >= 2, reading  # long enough to wrap at 60 columns
    # Every line of the frame fits (the title's URLs included): the terminal never wraps.
    assert all(len(line) <= 59 for line in body.splitlines()), body


def test_wrapping_keeps_every_word_whole():
    from pairwatch.cli import view

    text = (
        "server_id_echo_fault (12 batches): unknown-id responses without missing ones: "
        "the server rewrote or invented ids; also responses_missing 3, id_type_mismatch 1"
    )
    label = "  reading, last 5 s: "
    lines = view.wrap(label, text, 50)
    assert lines[0].startswith(label)
    assert all(len(line) <= 50 for line in lines)
    assert all(line.startswith(" " * len(label)) for line in lines[1:])
    assert " ".join(line.strip() for line in lines)[len(label.strip()) + 1 :] == text


def test_fit_breaks_long_frame_lines_between_words_and_keeps_short_ones():
    from pairwatch.cli import view

    title = (
        "pairwatch demo  server http://127.0.0.1:4/  metrics http://127.0.0.1:5/metrics "
        "(port 9464 is in use, so the metrics are on port 5)"
    )
    lines = view.fit([title, "  short"], 60)
    assert lines[-1] == "  short"
    assert all(len(line) <= 60 for line in lines)
    assert lines[1].startswith("    ")
    assert " ".join(line.strip() for line in lines[:-1]).split() == title.split()
