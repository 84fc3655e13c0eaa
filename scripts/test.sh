#!/usr/bin/env bash
# One command for the tests: install ragspine with its dev extra into .venv, lint, type-check, test.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh dev
.venv/bin/ruff check src tests bench examples
.venv/bin/ruff format --check src tests bench examples
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
