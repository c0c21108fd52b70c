# Sourced by scripts/test: run pytest and fail unless it ended with its summary line.
#
# A pytest process that is ended early (a stray os._exit, a signal, a crashed
# interpreter) may report exit code 0 without having run everything; only the
# final "N passed ... in Xs" line proves the run finished.

#
# It runs under scripts/_reap.py, which fails the run when a process the tests
# started is still alive after pytest ended (it names and kills each one).

# Usage: pytest_run PYTEST [ARGS...]; returns pytest's code, or 1 when the summary is missing
# or a process was left behind.
pytest_run() {
  local log rc
  log="$(mktemp)"
  set +e
  "${REAP_PYTHON:-python3}" "$(dirname "${BASH_SOURCE[0]}")/_reap.py" "$@" 2>&1 | tee "$log"
  rc="${PIPESTATUS[0]}"
  set -e
  # pytest exits 5 when it collected no tests: a failure here too.
  if [ "$rc" -ne 0 ]; then
    rm -f "$log"
    return "$rc"
  fi
  if ! tail -n 3 "$log" | grep -Eq '(passed|failed|errors?|skipped|deselected|xfailed|xpassed|warnings?|no tests ran)\b.* in [0-9.]+s'; then
    rm -f "$log"
    echo "scripts/test: '$*' exited 0 without pytest's summary line: the run ended early" >&2
    return 1
  fi
  rm -f "$log"
}
