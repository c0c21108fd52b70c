# Shared by scripts/demo and scripts/test: a project venv with the package installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "zerto-rewind needs Python 3.11 or newer")'
if [ ! -x "$ROOT/.venv/bin/python" ]; then
  "$PY" -m venv "$ROOT/.venv"
fi
VENV="$ROOT/.venv"
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
