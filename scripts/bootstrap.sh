#!/usr/bin/env bash
# Set up what one job needs, without root, in the virtualenv .venv:
#   bash scripts/bootstrap.sh demo   the demo's dependencies only (pairwatch's own and its demo
#                                    extra: httpx, requests); no npm, no dashboard tooling, and
#                                    no build of pairwatch itself: scripts/demo.sh runs it from
#                                    src/.  Seconds on a fresh machine.
#   bash scripts/bootstrap.sh dev    (the default) pairwatch installed editable with every extra,
#                                    plus the npm packages the tests start (anvil, MCP servers)
#                                    in tests/servers/node_modules, and mitmproxy in its own
#                                    .venv-mitmproxy (its pins clash with the dev venv's), and
#                                    multilspy in .venv-multilspy (it pins pygls 1.x)
#   bash scripts/bootstrap.sh peers  dev, plus .venv-peers: the test dependencies of the MCP SDK's
#                                    and web3.py's own suites (tests/peers/requirements.txt), in
#                                    a venv of their own that sees the dev venv behind its own
#                                    packages; scripts/peers.py runs those suites from it.
# Sourced by scripts/demo.sh (demo) and scripts/test.sh (dev); PAIRWATCH_EXTRAS overrides.
# Each set keeps its own stamp in .venv, so running the demo never makes the next test run
# reinstall, and work is redone only when pyproject.toml (or, for dev, the npm manifests)
# changed.  A dev install contains the demo's extras, so it satisfies the demo too.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
python="${PAIRWATCH_PYTHON:-python3}"
extras="${PAIRWATCH_EXTRAS:-${1:-dev}}"
peers=false
if [ "$extras" = peers ]; then peers=true; extras=dev; fi
quiet=(-q --disable-pip-version-check)

stamp_of() {  # what an install of extras $1 depends on
  if [ "$1" = dev ]; then
    cat pyproject.toml tests/servers/package*.json 2>/dev/null | sha256sum | cut -c1-16
  else
    sha256sum < pyproject.toml | cut -c1-16
  fi
}
current() { [ "$(cat ".venv/.pairwatch-stamp.$1" 2>/dev/null || true)" = "$(stamp_of "$1")" ]; }
ensure_pip() {  # a venv made for the demo has none
  .venv/bin/python -m pip --version >/dev/null 2>&1 || .venv/bin/python -m ensurepip >/dev/null
}
no_location_warnings() { grep -v "^WARNING: Location" >&2 || true; }

# The requirements of pairwatch and the given extras (self-references such as
# "pairwatch[httpx,requests]" expanded), read from pyproject.toml; fails without tomllib
# (Python < 3.11), and the caller then installs the package instead.
requirements() {
  "$python" - "$@" <<'PY'
import re, sys, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
def expand(names):
    for name in names:
        for req in extras[name]:
            own = re.fullmatch(r"pairwatch\[(.*)\]", req.strip())
            yield from expand(own.group(1).split(",")) if own else [req]
print("\n".join([*project["dependencies"], *expand(sys.argv[1:])]))
PY
}

install_demo() {
  # No pip inside the venv and no build backend: the outer pip installs the requirements
  # into it (pip >= 22.3 has --python); otherwise the venv gets its own pip.
  local reqs=".venv/requirements-$extras.txt"
  [ -x .venv/bin/python ] || "$python" -m venv --without-pip .venv
  if requirements "$extras" > "$reqs" 2>/dev/null &&
    "$python" -m pip "${quiet[@]}" --python .venv/bin/python install -r "$reqs" \
      2> >(no_location_warnings); then
    return
  fi
  ensure_pip
  .venv/bin/python -m pip install "${quiet[@]}" -e ".[$extras]" 2> >(no_location_warnings)
}

install_dev() {
  [ -x .venv/bin/python ] || "$python" -m venv .venv
  ensure_pip
  .venv/bin/python -m pip install "${quiet[@]}" --upgrade pip >/dev/null 2> >(no_location_warnings)
  .venv/bin/python -m pip install "${quiet[@]}" -e ".[$extras]" 2> >(no_location_warnings)
  if [ -f tests/servers/package.json ]; then
    echo "bootstrap: installing npm packages into tests/servers/node_modules" >&2
    if [ -f tests/servers/package-lock.json ]; then
      npm ci --prefix tests/servers --no-audit --no-fund --loglevel=error
    else
      npm install --prefix tests/servers --no-audit --no-fund --loglevel=error
    fi
  fi
}

# mitmproxy pins its own versions of libraries the dev venv also holds (h11, cryptography,
# ...), so the audit tests' capture proxy lives in a venv of its own; its stamp is the pin.
MITMPROXY_PIN="mitmproxy==11.0.2"
# A failed install leaves no stamp and does not stop the rest: only the tests that record
# through mitmproxy need it, and they skip naming this step (or fail, under CI=true).
install_mitmproxy() {
  [ "$(cat .venv-mitmproxy/.pairwatch-stamp 2>/dev/null || true)" = "$MITMPROXY_PIN" ] && return
  echo "bootstrap: installing $MITMPROXY_PIN into .venv-mitmproxy" >&2
  if { [ -x .venv-mitmproxy/bin/python ] || "$python" -m venv .venv-mitmproxy; } &&
    .venv-mitmproxy/bin/python -m pip install "${quiet[@]}" "$MITMPROXY_PIN" \
      2> >(no_location_warnings); then
    echo "$MITMPROXY_PIN" > .venv-mitmproxy/.pairwatch-stamp
  else
    echo "bootstrap: could not install $MITMPROXY_PIN; its capture tests will not run" >&2
  fi
}

if [ ! -x .venv/bin/python ] || ! { current "$extras" || { [ "$extras" = demo ] && current dev; }; }; then
  echo "bootstrap: installing pairwatch[$extras]'s requirements into .venv" >&2
  if [ "$extras" = dev ]; then install_dev; else install_demo; fi
  stamp_of "$extras" > ".venv/.pairwatch-stamp.$extras"
fi
# multilspy pins pygls 1.x (through jedi-language-server) and requests==2.33.0, which cannot
# share the dev venv with pygls 2.x: tests/lsp/test_lsp_multilspy.py runs it from a venv of
# its own, with pairwatch's core requirements beside it and pairwatch itself from src/.
MULTILSPY_PIN="multilspy==0.1.1"
install_multilspy() {
  local want
  want="$MULTILSPY_PIN $(sha256sum < pyproject.toml | cut -c1-16)"
  [ "$(cat .venv-multilspy/.pairwatch-stamp 2>/dev/null || true)" = "$want" ] && return
  echo "bootstrap: installing $MULTILSPY_PIN into .venv-multilspy" >&2
  if { [ -x .venv-multilspy/bin/python ] || "$python" -m venv .venv-multilspy; } &&
    requirements > .venv-multilspy/requirements.txt 2>/dev/null &&
    .venv-multilspy/bin/python -m pip install "${quiet[@]}" -r .venv-multilspy/requirements.txt \
      "$MULTILSPY_PIN" 2> >(no_location_warnings); then
    echo "$want" > .venv-multilspy/.pairwatch-stamp
  else
    echo "bootstrap: could not install $MULTILSPY_PIN; its test will not run" >&2
  fi
}

if [ "$extras" = dev ]; then install_mitmproxy; install_multilspy; fi

install_peers() {
  local stamp=.venv-peers/.pairwatch-stamp
  local want
  want="$(cat tests/peers/requirements.txt .venv/.pairwatch-stamp.dev | sha256sum | cut -c1-16)"
  [ "$(cat "$stamp" 2>/dev/null || true)" = "$want" ] && return
  echo "bootstrap: installing the peers' test dependencies into .venv-peers" >&2
  [ -x .venv-peers/bin/python ] || "$python" -m venv .venv-peers
  local dev_site peer_site
  dev_site="$(.venv/bin/python -c 'import site; print(site.getsitepackages()[0])')"
  peer_site="$(.venv-peers/bin/python -c 'import site; print(site.getsitepackages()[0])')"
  echo "import site; site.addsitedir('$dev_site')" > "$peer_site/zz_pairwatch_dev.pth"
  .venv-peers/bin/python -m pip install "${quiet[@]}" -r tests/peers/requirements.txt \
    2> >(no_location_warnings)
  echo "$want" > "$stamp"
}

if [ "$peers" = true ]; then install_peers; fi
