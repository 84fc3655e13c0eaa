#!/usr/bin/env bash
# One command for the tests: install ragspine with its dev extra into .venv, lint, type-check, test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh dev
# the web page's browser test drives Debian's Chromium (nothing comes from Playwright's servers)
if ! command -v chromium >/dev/null 2>&1; then
    SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get install -y -q chromium >/dev/null \
        || { $SUDO apt-get update -q >/dev/null && $SUDO apt-get install -y -q chromium >/dev/null; }
fi
.venv/bin/ruff check src tests bench examples
.venv/bin/ruff format --check src tests bench examples
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
