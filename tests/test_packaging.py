"""What a pip user gets: a wheel carrying the dashboards, rules and runbook, a command that
writes them out, --version, the license; and the same export from a checkout.

The wheel is built from this checkout and installed into a fresh virtualenv, so the test
reads the files from the installed package, not from the repository.  The exported rules go
through the real promtool (``check rules`` and the shipped ``test rules``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
from components import require

import pairwatch

REPO = Path(__file__).resolve().parents[1]
DASHBOARDS = REPO / "dashboards"
PROMTOOL = "apt-get install prometheus (done by .ci/run)"


def shipped_files() -> dict[str, bytes]:
    """What the repository's dashboards/ holds that a user deploys (not the generators)."""
    return {
        p.relative_to(DASHBOARDS).as_posix(): p.read_bytes()
        for p in sorted(DASHBOARDS.rglob("*"))
        if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts
    }


def exported(target: Path) -> dict[str, bytes]:
    return {
        p.relative_to(target).as_posix(): p.read_bytes()
        for p in sorted(target.rglob("*"))
        if p.is_file()
    }


def promtool_checks(target: Path) -> None:
    require(shutil.which("promtool") is not None, "promtool", PROMTOOL)
    rules = sorted(str(p) for p in (target / "rules").glob("*.yaml"))
    assert len(rules) >= 2, rules
    check = subprocess.run(
        ["promtool", "check", "rules", *rules], capture_output=True, text=True, timeout=60
    )
    assert check.returncode == 0, check.stdout + check.stderr
    assert check.stdout.count("SUCCESS") == len(rules), check.stdout
    tests = sorted(str(p) for p in (target / "rules" / "tests").glob("*.yaml"))
    if tests:
        done = subprocess.run(
            ["promtool", "test", "rules", *tests],
            cwd=target / "rules",
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stdout + done.stderr


def run(*args: str, exe: str | None = None) -> subprocess.CompletedProcess[str]:
    command = [exe] if exe else [sys.executable, "-m", "pairwatch"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=120)


URL = "https://wiki.example.com/ops/pairwatch-runbook.md"
# What the export renders from pairwatch.alerting instead of copying (the rest is copied).
RENDERED = {
    "rules/pairwatch-alerts.yaml",
    "rules/pairwatch-slo.yaml",
    "alertmanager/pairwatch-inhibit.yaml",
    "rules/tests/pairwatch-thresholds.test.yaml",
    "rules/tests/pairwatch-slo.test.yaml",
    "rules/tests/pairwatch-liveness.test.yaml",
}


def test_export_from_a_checkout_writes_every_shipped_file_and_the_rules_pass_promtool(tmp_path):
    target = tmp_path / "monitoring"
    done = run("dashboards", "export", str(target), "--no-runbook-links")
    assert done.returncode == 0, done.stderr
    want = shipped_files()
    assert {
        "pairwatch.json",
        "runbook.md",
        "rules/pairwatch-alerts.yaml",
        "rules/pairwatch-slo.yaml",
        "rules/pairwatch-recording.yaml",
    } <= set(want)
    got = exported(target)
    assert set(got) == set(want) - {"operators.md"}  # operators.md is written as README.md
    # Copied files are the committed ones; the committed rendered ones are the defaults'.
    for name in (
        set(want)
        - RENDERED
        - {"rules/tests/pairwatch-alerts.test.yaml", "README.md", "operators.md"}
    ):
        assert got[name] == want[name], name
    for name in RENDERED - {"rules/pairwatch-alerts.yaml"}:
        assert got[name] == want[name], name
    assert b'runbook_url: "' not in got["rules/pairwatch-alerts.yaml"]
    assert sorted(done.stdout.splitlines()) == sorted(str(target / name) for name in got)
    promtool_checks(target)


def test_export_refuses_rules_without_runbook_links(tmp_path):
    done = run("dashboards", "export", str(tmp_path))
    assert done.returncode == 2
    assert done.stderr == (
        "pairwatch dashboards: error: --runbook-url URL is required (where on-call people "
        "open runbook.md; every alert links to it), or --no-runbook-links\n"
    )
    assert not any(tmp_path.iterdir())


def test_export_renders_the_configuration(tmp_path):
    """Selector, grouping labels, objective, dashboard link and the scrape alert switch reach
    every rule; the exported rules and the tests that still apply pass promtool."""
    target = tmp_path / "cfg"
    done = run(
        "dashboards", "export", str(target), "--runbook-url", URL,
        "--dashboard-url", "https://grafana.example.com/d/pairwatch",
        "--group-by", "cluster,namespace", "--objective", "99.5", "--no-scrape-alert",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "pairwatch-alerts.test.yaml not written" in done.stderr
    alerts = (target / "rules" / "pairwatch-alerts.yaml").read_text()
    slo = (target / "rules" / "pairwatch-slo.yaml").read_text()
    assert "PairwatchScrapeDown" not in alerts
    assert alerts.count('dashboard_url: "https://grafana.example.com/d/pairwatch"') == 17
    assert alerts.count(f'runbook_url: "{URL}#') == 17
    assert "sum by (cluster, namespace, job, server_address, pairwatch_side)" in alerts + slo
    assert "(14.4 * 0.005)" in alerts
    assert not (target / "rules" / "tests" / "pairwatch-alerts.test.yaml").exists()
    promtool_checks(target)

    narrow = tmp_path / "narrow"
    done = run(
        "dashboards", "export", str(narrow), "--runbook-url", URL, "--selector", 'job=~"api.*"'
    )
    assert done.returncode == 0, done.stderr
    text = (narrow / "rules" / "pairwatch-alerts.yaml").read_text()
    # every selector, and once in the header
    assert text.count('job=~"api.*"') - 1 == text.count('pairwatch_integration!="audit"') > 20
    assert not (narrow / "rules" / "tests").exists()
    promtool_checks(narrow)


def test_dashboard_url_is_pinned_in_the_shipped_rule_tests(tmp_path):
    done = run(
        "dashboards", "export", str(tmp_path), "--runbook-url", URL,
        "--dashboard-url", "https://grafana.example.com/d/pairwatch",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    promtool_checks(tmp_path)  # the scenario tests expect the dashboard_url annotation too


def test_the_exported_readme_is_the_operators_and_its_commands_run_from_the_export(tmp_path):
    """What each file is and how to load it, with the configuration it was rendered for;
    nothing of the repository (generators, dev installs, relative paths out of the export);
    its shell block runs as written from the export's root."""
    require(shutil.which("promtool") is not None, "promtool", PROMTOOL)
    target = tmp_path / "monitoring"
    url = "https://wiki.example.org/ops/runbook.md"
    done = run("dashboards", "export", str(target), "--runbook-url", url, "--objective", "99.5")
    assert done.returncode == 0, done.stderr
    readme = (target / "README.md").read_text()
    assert readme.startswith("# pairwatch monitoring files")
    assert "| availability objective (`--objective`) | 99.5% of requests answered |" in readme
    # The dashboard is copied as is; its error budget reads the objective the SLO rules record.
    slo = (target / "rules" / "pairwatch-slo.yaml").read_text()
    assert "- record: job_server_side:pairwatch_slo_objective:ratio" in slo
    assert "0 * job_server_side:pairwatch_slo_requests:rate3d + 0.995\n" in slo
    assert (
        "job_server_side:pairwatch_slo_objective:ratio{" in (target / "pairwatch.json").read_text()
    )
    assert f"`{url}`" in readme
    for text in ("generate.py", "pip install -e", "../", "`dashboards/"):
        assert text not in readme, text
    named = set(
        re.findall(r"`((?:rules|alertmanager|provisioning)/[^`*]+|[a-z]+\.(?:json|md))`", readme)
    )
    for name in named - {"rules/"}:
        assert (target / name).exists(), name
    (block,) = re.findall(r"(?ms)^```bash\n(.*?)^```", readme)
    checked = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", block], cwd=target, capture_output=True, text=True
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.count("SUCCESS") >= 4


def test_runbook_url_points_every_alert_at_the_published_runbook(tmp_path):
    url = URL
    target = tmp_path / "out"
    done = run("dashboards", "export", str(target), "--runbook-url", url)
    assert done.returncode == 0, done.stderr
    original = (DASHBOARDS / "rules" / "pairwatch-alerts.yaml").read_text()
    alerts = (target / "rules" / "pairwatch-alerts.yaml").read_text()
    before = re.findall(r'runbook_url:\s*"?([^"\s]+)', original)
    after = re.findall(r'runbook_url:\s*"?([^"\s]+)', alerts)
    assert len(after) == len(before) >= 1
    # The address is replaced, each alert keeps its own anchor.
    assert [a.split("#", 1)[1] for a in after] == [b.split("#", 1)[1] for b in before]
    assert all(a.startswith(url + "#") for a in after), after
    dashboard = (target / "pairwatch.json").read_text()
    assert "runbook.md" not in dashboard.replace(url, "")
    promtool_checks(target)  # the rule tests expect the same rewritten annotations


def test_export_refuses_to_overwrite_without_force(tmp_path):
    assert run("dashboards", "export", str(tmp_path), "--runbook-url", URL).returncode == 0
    (tmp_path / "runbook.md").write_text("our own notes\n")
    again = run("dashboards", "export", str(tmp_path), "--runbook-url", URL)
    assert again.returncode == 2
    assert again.stderr == (
        f"pairwatch dashboards: error: {tmp_path / 'README.md'} exists (use --force to overwrite)\n"
    )
    assert (tmp_path / "runbook.md").read_text() == "our own notes\n"
    forced = run("dashboards", "export", str(tmp_path), "--no-runbook-links", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "runbook.md").read_bytes() == (DASHBOARDS / "runbook.md").read_bytes()


def test_a_bad_runbook_url_is_one_line(tmp_path):
    done = run("dashboards", "export", str(tmp_path), "--runbook-url", "runbook.md")
    assert done.returncode == 2
    assert done.stderr == (
        "pairwatch dashboards: error: --runbook-url 'runbook.md' is not an http(s) URL\n"
    )
    assert not any(tmp_path.iterdir())


def test_the_wheel_carries_the_dashboards_license_and_metadata(wheel):
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        data = {n: z.read(n) for n in names if n.startswith("pairwatch/_dashboards/")}
        (metadata_name,) = [n for n in names if n.endswith(".dist-info/METADATA")]
        metadata = z.read(metadata_name).decode()
        licenses = [n for n in names if n.endswith("licenses/LICENSE")]
        license_text = z.read(licenses[0]).decode() if licenses else ""
    assert {n.removeprefix("pairwatch/_dashboards/"): b for n, b in data.items()} == shipped_files()
    assert not [n for n in names if n.startswith("pairwatch/_dashboards/") and n.endswith(".py")]
    assert "Apache License" in license_text
    assert "Version 2.0, January 2004" in license_text
    assert "License-Expression: Apache-2.0" in metadata
    for classifier in (
        "Programming Language :: Python :: 3.11",
        "Development Status :: ",
        "Typing :: Typed",
    ):
        assert f"Classifier: {classifier}" in metadata
    # only the Python versions CI runs (.ci/run: this interpreter's)
    claimed = re.findall(r"Classifier: Programming Language :: Python :: (3\.\d+)", metadata)
    assert claimed == [f"{sys.version_info[0]}.{sys.version_info[1]}"]
    assert "Description-Content-Type: text/markdown" in metadata
    assert "Provides-Extra: httpx" in metadata
    assert "Provides-Extra: demo" in metadata


def test_a_pip_user_exports_the_dashboards_from_the_installed_wheel(wheel, tmp_path):
    venv = tmp_path / "venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120
    )
    python = venv / "bin" / "python"
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(python),
            "install",
            "--no-deps",
            "--no-index",
            "--disable-pip-version-check",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    # The dependencies come from this environment's site-packages (read-only, appended after
    # the new venv's own, so the installed wheel wins); the checkout's src/ is not visible.
    site = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    deps = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "deps.pth").write_text("\n".join(sorted(deps)) + "\n")
    where = subprocess.run(
        [
            str(python),
            "-c",
            "import pairwatch, sys; print(pairwatch.__file__);print(str(sys.path))",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    assert where.stdout.startswith(str(site)), where.stdout
    assert str(REPO / "src") not in where.stdout

    exe = str(venv / "bin" / "pairwatch")
    version = run("--version", exe=exe)
    assert version.stdout == f"pairwatch {pairwatch.__version__}\n", version.stderr
    target = tmp_path / "monitoring"
    done = run("dashboards", "export", str(target), "--runbook-url", URL, exe=exe)
    assert done.returncode == 0, done.stderr
    assert set(exported(target)) == set(shipped_files()) - {"operators.md"}
    promtool_checks(target)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--no-runbook-links", "--group-by", "cluster,name-space"],
            "--group-by 'name-space' is not a Prometheus label name",
        ),
        (
            ["--no-runbook-links", "--dashboard-url", "grafana/d/x"],
            "--dashboard-url 'grafana/d/x' is not an http(s) URL",
        ),
    ],
)
def test_a_bad_export_flag_is_one_line(tmp_path, flags, message):
    done = run("dashboards", "export", str(tmp_path), *flags)
    assert done.returncode == 2
    assert done.stderr == f"pairwatch dashboards: error: {message}\n"
    assert not any(tmp_path.iterdir())


def test_an_objective_outside_the_tested_range_is_refused(tmp_path):
    done = run("dashboards", "export", str(tmp_path), "--no-runbook-links", "--objective", "100")
    assert done.returncode == 2
    assert "--objective" in done.stderr
    assert "must be at most 99.99" in done.stderr
    assert len(done.stderr.splitlines()) == 1
    assert not any(tmp_path.iterdir())
