#!/usr/bin/env bash
# Set up a development environment from a clean clone: a virtualenv in .venv with
# flowmap installed editable and its test dependencies, plus Graphviz, Chromium and tmux
# from Debian when this machine can install them. Idempotent and quick the second
# time: pip runs again only when pyproject.toml or setup.py changed.
#
# Usage: bash scripts/setup.sh        (then: . .venv/bin/activate)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
EXTRAS=${FLOWMAP_EXTRAS:-dev}

if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv"
  "$PYTHON" -m venv .venv
fi

# The stamp holds the hash of what the build reads and the extras installed, sorted.
# A venv that already holds a superset of the extras asked for is up to date: demo.sh
# (dev) and test.sh (dev,integrations) alternate without reinstalling each other's.
# When an install is needed it installs the union, so the next alternation is quick too.
stamp=.venv/.flowmap-installed
hash="$(cat pyproject.toml setup.py flowmap/capture/describers/*.c flowmap/capture/*.c flowmap/writer/*.c flowmap/discover/*.c | sha256sum | cut -c1-16)"
extras_set() { tr ', ' '\n\n' | sed '/^$/d' | sort -u; }
want_extras="$(printf '%s' "$EXTRAS" | extras_set)"
have_hash="" have_extras=""
if [ -f "$stamp" ]; then
  have_hash="$(cut -d' ' -f1 "$stamp")"
  have_extras="$(cut -s -d' ' -f2- "$stamp" | extras_set)"
fi
missing_extras="$(comm -23 <(printf '%s\n' "$want_extras" | sed '/^$/d') <(printf '%s\n' "$have_extras" | sed '/^$/d'))"
if [ "$have_hash" != "$hash" ] || [ -n "$missing_extras" ]; then
  union="$(printf '%s\n%s\n' "$want_extras" "$have_extras" | sed '/^$/d' | sort -u | paste -sd, -)"
  echo "setup: installing flowmap[$union] (torch is pinned to the CPU build 2.13.0)"
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  # The distribution was called `flowmap` before it became `flowmap-rl`: drop the
  # old one so a venv made by an older checkout holds one flowmap, not two.
  .venv/bin/python -m pip uninstall -y -q flowmap >/dev/null 2>&1 || true
  # setuptools' build chatter goes to a log, shown only when the install fails
  if ! .venv/bin/python -m pip install -q -e ".[$union]" >.venv/pip-install.log 2>&1; then
    cat .venv/pip-install.log >&2
    exit 1
  fi
  echo "$hash $union" > "$stamp"
fi
# An editable install writes no bytecode, and where PYTHONDONTWRITEBYTECODE is set
# Python never caches any: every traced child would compile flowmap's modules from
# source. Compile them once, as a regular install does (quick when up to date).
.venv/bin/python -m compileall -q -j 0 flowmap trainer cli >/dev/null

# Graphviz (`dot`) lays out the graph; Chromium runs the HTML tests, tmux the
# terminal ones. All are optional for users: flowmap falls back to its own layout
# and those tests skip. Install them where we can (root on Debian), say so where we can't.
missing=()
command -v dot >/dev/null 2>&1 || missing+=(graphviz)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)  # the tests read `flowmap top` from a real terminal
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing ${missing[*]} from Debian"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  else
    echo "setup: optional tools missing: ${missing[*]} (install with: apt-get install ${missing[*]})"
  fi
fi
