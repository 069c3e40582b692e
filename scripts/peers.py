"""Run the MCP SDK's and web3.py's own client-side tests bare and with pairwatch everywhere.

    python scripts/peers.py            fetch (once), run both passes of both suites, compare
    python scripts/peers.py --only mcp

Why: those suites hold their authors' own assertions on what a client sends and receives,
over every transport they support.  Run against the *installed* versions (their source
distributions, fetched with ``pip download --no-deps --no-binary :all:`` into ``.peers/``),
once bare and once with every client instrumented (``tests/peers/pairwatch_peers_plugin.py``,
loaded with ``-p``), they prove two guarantees no test of ours can: the same tests pass
(pairwatch changes no client's behaviour), and pairwatch's fault counters stay at zero
(healthy exchanges are never counted as faults), except for the tests listed in
``tests/peers/allowlist.txt``, each with its reason (a test that sends bad input on purpose).

The two passes of a suite run in parallel processes.  The suites' test dependencies live in
``.venv-peers`` (``bash scripts/bootstrap.sh peers``), which sees the dev venv's packages
behind its own, so mcp, web3 and pairwatch are exactly the ones the dev venv has.
Exit status: 0 when both guarantees hold, 1 otherwise, with every difference printed.
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".peers"
PLUGIN_DIR = ROOT / "tests" / "peers"
ALLOWLIST = PLUGIN_DIR / "allowlist.txt"
PYTHON = ROOT / ".venv-peers" / "bin" / "python"


@dataclass(frozen=True)
class Suite:
    name: str  # the distribution, as pip knows it
    paths: tuple[str, ...]  # the client-side test folders, relative to the sdist
    args: tuple[str, ...] = ()  # their own settings we must override for a clean run


SUITES = (
    Suite(
        "mcp",
        (
            "tests/client",
            "tests/shared",
            "tests/issues",
            "tests/transports",
            "tests/interaction",
        ),
        # their addopts load pytest-examples (not needed here); the dev venv's pytest-asyncio
        # is not theirs (they run on anyio)
        ("-p", "no:examples", "-p", "no:asyncio", "--color=no", "-o", "log_cli=false"),
    ),
    Suite(
        "web3",
        (
            "tests/core/providers",
            "tests/core/manager",
            "tests/core/middleware",
            "tests/core/subscriptions",
        ),
    ),
)


def fetch(name: str) -> Path:
    """The unpacked sdist of the installed version of ``name`` (downloaded once)."""
    version = metadata.version(name)
    target = CACHE / f"{name}-{version}"
    if (target / "tests").is_dir():
        return target
    CACHE.mkdir(exist_ok=True)
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--disable-pip-version-check",
         "--no-deps", "--no-binary", ":all:", f"{name}=={version}", "-d", str(CACHE)],
        check=True,
    )  # fmt: skip
    (archive,) = CACHE.glob(f"{name}-{version}.tar.gz")
    with tarfile.open(archive) as tar:
        tar.extractall(CACHE, filter="data")
    return target


def run_pass(suite: Suite, source: Path, mode: str) -> subprocess.Popen[bytes]:
    report = CACHE / f"{suite.name}.{mode}.json"
    report.unlink(missing_ok=True)
    env = {
        **os.environ,
        "PAIRWATCH_PEERS": mode,
        "PAIRWATCH_PEERS_REPORT": str(report),
        "PYTHONPATH": os.pathsep.join([str(PLUGIN_DIR), str(ROOT / "src")]),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    env.pop("CI", None)  # their conftests read CI for their own purposes
    argv = [
        str(PYTHON), "-m", "pytest", "-q", "-p", "pairwatch_peers_plugin",
        "-p", "no:cacheprovider", "-p", "no:randomly", *suite.args, *suite.paths,
    ]  # fmt: skip
    log = open(CACHE / f"{suite.name}.{mode}.log", "wb")  # noqa: SIM115 - closed by the OS at exit
    return subprocess.Popen(argv, cwd=source, env=env, stdout=log, stderr=subprocess.STDOUT)


@dataclass(frozen=True)
class Allowed:
    """One allow-list line: which tests, which fault series they may move, and why."""

    tests: str  # an fnmatch pattern of node ids
    faults: tuple[str, ...]  # fnmatch patterns of fault keys (counter[integration/transport/...])
    reason: str

    def covers(self, nodeid: str, faults: dict[str, int]) -> bool:
        return matches(nodeid, self.tests) and all(
            any(matches(key, p) for p in self.faults) for key in faults
        )


def matches(text: str, pattern: str) -> bool:
    """``fnmatch`` with ``*`` and ``?`` only: brackets are literal (node ids and series keys
    are full of them)."""
    escaped = "".join("[" + c + "]" if c in "[]" else c for c in pattern)
    return fnmatch.fnmatchcase(text, escaped)


def load_allowlist(path: Path = ALLOWLIST) -> list[Allowed]:
    """``tests | fault keys | reason`` per line, ``#`` starts a comment.

    Both first fields are patterns (``*``, ``?``) (the second a comma-separated list), so that one
    line covers a test module that sends bad input throughout while a fault of another kind
    in that module still fails.  A line without a reason is an error: every exception must
    say why.
    """
    entries: list[Allowed] = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = [part.strip() for part in line.split("|", 2)]
        if len(parts) != 3 or not all(parts):
            raise ValueError(f"{path.name}:{number}: want 'tests | fault keys | reason'")
        faults = tuple(p.strip() for p in parts[1].split(",") if p.strip())
        entries.append(Allowed(parts[0], faults, parts[2]))
    return entries


def compare(
    suite: str, bare: dict[str, dict], instrumented: dict[str, dict], allowed: list[Allowed]
) -> list[str]:
    """What breaks the two guarantees, one line per problem (empty: all good)."""
    problems = []
    for nodeid in sorted(set(bare) | set(instrumented)):
        was = bare.get(nodeid, {}).get("outcome", "not run")
        now = instrumented.get(nodeid, {}).get("outcome", "not run")
        if was != now:
            problems.append(f"{suite}: {nodeid}: {was} bare, {now} instrumented")
    for nodeid, entry in sorted(instrumented.items()):
        faults = entry.get("faults") or {}
        if any(key.startswith("pairwatch.internal_errors") for key in faults):
            problems.append(f"{suite}: {nodeid}: pairwatch failed inside the client: {faults}")
        elif faults and allowed_by(nodeid, faults, allowed) is None:
            problems.append(f"{suite}: {nodeid}: counted {faults} on a healthy exchange")
    return problems


def allowed_by(nodeid: str, faults: dict[str, int], allowed: list[Allowed]) -> Allowed | None:
    """The allow-list line that covers what a test counted, if any."""
    return next((entry for entry in allowed if entry.covers(nodeid, faults)), None)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=[s.name for s in SUITES])
    args = parser.parse_args(argv)
    if not PYTHON.exists():
        print("peers: .venv-peers is missing: bash scripts/bootstrap.sh peers", file=sys.stderr)
        return 1
    allowed = load_allowlist()
    suites = [s for s in SUITES if args.only in (None, s.name)]
    started = time.monotonic()
    running = []
    for suite in suites:
        source = fetch(suite.name)
        for mode in ("bare", "instrumented"):
            running.append((suite, mode, run_pass(suite, source, mode)))
    reports: dict[tuple[str, str], dict[str, dict]] = {}
    for suite, mode, proc in running:
        code = proc.wait()
        path = CACHE / f"{suite.name}.{mode}.json"
        log = CACHE / f"{suite.name}.{mode}.log"
        # 0: all passed, 1: some failed (compared below); anything else: it did not run
        if code not in (0, 1) or not path.exists():
            print(f"peers: {suite.name} {mode}: pytest exited {code}; see {log}")
            return 1
        tests = json.loads(path.read_text(encoding="utf-8"))["tests"]
        if not tests:
            print(f"peers: {suite.name} {mode}: no test ran; see {log}")
            return 1
        reports[suite.name, mode] = tests
    problems: list[str] = []
    used: set[str] = set()
    for suite in suites:
        bare, inst = reports[suite.name, "bare"], reports[suite.name, "instrumented"]
        problems += compare(suite.name, bare, inst, allowed)
        passed = sum(1 for e in inst.values() if e["outcome"] == "passed")
        counted = {n for n, e in inst.items() if e.get("faults")}
        for nodeid in counted:
            entry = allowed_by(nodeid, inst[nodeid]["faults"], allowed)
            if entry is not None:
                used.add(entry.tests)
        bare_passed = sum(1 for e in bare.values() if e["outcome"] == "passed")
        print(f"peers: {suite.name}: {len(inst)} tests; passed {bare_passed} bare,"
              f" {passed} instrumented; {len(counted)} counted a fault")  # fmt: skip
    for pattern in sorted({entry.tests for entry in allowed} - used):
        if any(pattern.startswith(p) for s in suites for p in s.paths):
            print(f"peers: allow-list entry no longer needed: {pattern}")
    print(f"peers: {time.monotonic() - started:.0f} s")
    for line in problems:
        print("peers: FAIL", line)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
