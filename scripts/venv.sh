# Sourced by demo.sh and test.sh: create .venv once and install ragspine with the given extra.
PYTHON="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$PYTHON" -m venv .venv
.venv/bin/python -m pip install --quiet --quiet --upgrade pip
.venv/bin/python -m pip install --quiet --quiet -e ".[$1]"
