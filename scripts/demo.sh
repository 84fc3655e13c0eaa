#!/usr/bin/env bash
# One command for the demo: install ragspine into .venv, ingest the sample corpus, answer queries.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/venv.sh docs,embed-onnx
.venv/bin/ragspine ingest examples/corpus --kb demo-kb --exclude '_drafts/**'
.venv/bin/python examples/demo.py demo-kb
