#!/usr/bin/env bash
# The project's test command (README, .ci/run): installs everything the tests need from scratch,
# then runs ruff, mypy and the whole test suite. Services (PostgreSQL, the Cosmos DB protocol
# server) are started by the test fixtures themselves.
set -euo pipefail
cd "$(dirname "$0")/.."

# Needs: Python >= 3.10, Node >= 18 with npm (the Cosmos DB protocol server), and PostgreSQL
# server binaries (initdb, pg_ctl), or root with apt-get to install them.
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "node and npm are missing: install Node.js >= 18 with npm (the tests run a local Cosmos DB server)" >&2
  exit 1
fi

if [ -n "${VIRTUAL_ENV:-}" ]; then
  PY=python  # the user's own environment: install into it, but leave its pip as it is
else
  [ -x .venv/bin/python ] || python3 -m venv .venv
  PY=.venv/bin/python
  "$PY" -m pip install -q --upgrade pip
fi

echo "== python packages"
"$PY" -m pip install -q -e ".[dev]"

# crewai 1.15 and google-adk 2.x cannot share one environment (opentelemetry-api): the CrewAI
# tests and the CrewAI docs example run in one of their own, .venv-crewai (made and refreshed
# here), or in the environment of CREWAI_PYTHON=<interpreter>, used as it is (it needs crewai,
# pytest, pytest-asyncio and hypothesis). The main run does not collect tests/crewai
# (tests/conftest.py); tests/test_readme.py runs the CrewAI example with CREWAI_PYTHON.
echo "== python packages, CrewAI environment"
if [ -z "${CREWAI_PYTHON:-}" ]; then
  [ -x .venv-crewai/bin/python ] || python3 -m venv .venv-crewai
  .venv-crewai/bin/python -m pip install -q --upgrade pip
  .venv-crewai/bin/python -m pip install -q -e ".[crewai]" pytest pytest-asyncio hypothesis
  CREWAI_PYTHON="$PWD/.venv-crewai/bin/python"
fi
export CREWAI_PYTHON

echo "== PostgreSQL server binaries"
if ! command -v initdb >/dev/null 2>&1 && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  else
    echo "PostgreSQL server binaries (initdb, pg_ctl) are missing: install PostgreSQL >= 13, or set POSTGRES_URL" >&2
    exit 1
  fi
fi

echo "== Cosmos DB protocol server (npm)"
npm ci --prefix tests/cosmos_server --no-audit --no-fund --loglevel=error

echo "== ruff"
"$PY" -m ruff check .
echo "== mypy"
"$PY" -m mypy
# Each pytest run's closing line is kept and printed again at the end, one per run, then the totals:
# a failed run does not stop the others, and the script exits non-zero if any failed.
SUMMARY=()
PASSED=0
FAILED=0
STATUS=0
count_of() {  # count_of WORD LINE: the number before WORD in a pytest closing line (0 if none)
  awk -v word="^$1,?$" '{for (i = 1; i < NF; i++) if ($(i + 1) ~ word) s += $i} END {print s + 0}' <<<"$2"
}
run_pytest() {  # run_pytest NAME COMMAND...
  local name=$1 log status line n
  shift
  log=$(mktemp)
  set +e
  "$@" 2>&1 | tee "$log"
  status=${PIPESTATUS[0]}
  set -e
  line=$(grep -E '([0-9]+ (passed|failed|errors?|skipped|deselected|xfailed|xpassed)|no tests ran)[^=]* in [0-9.]+s' "$log" | tail -n 1 | sed -E 's/^=+ //; s/ =+$//' || true)
  rm -f "$log"
  SUMMARY+=("pytest, $name: ${line:-no closing line} (exit $status)")
  PASSED=$((PASSED + $(count_of "passed" "$line")))
  n=$(( $(count_of "failed" "$line") + $(count_of "errors?" "$line") ))
  FAILED=$((FAILED + n))
  if [ "$status" -ne 0 ] && [ "$n" -eq 0 ]; then FAILED=$((FAILED + 1)); fi  # a run that died
  if [ "$status" -ne 0 ]; then STATUS=$status; fi
}

# pytest-xdist: one worker per CPU (PYTEST_WORKERS=N to choose, 0 for none); each worker starts
# its own PostgreSQL and Cosmos DB servers on free ports (the fixtures are per process)
echo "== pytest"
run_pytest "main" "$PY" -m pytest -n "${PYTEST_WORKERS:-auto}" "$@"
if [ $# -eq 0 ]; then
  # the property tests again with the column path off: the reference alone gives the same answers
  echo "== pytest, reference path (AGENTSTATE_REDUCER_REFERENCE=1)"
  run_pytest "reference path" env AGENTSTATE_REDUCER_REFERENCE=1 "$PY" -m pytest -q tests/test_properties.py \
    tests/test_validity.py tests/test_warm_equals_fresh.py tests/test_reference_switch.py

  echo "== pytest, CrewAI (tests/crewai, its own environment)"
  run_pytest "CrewAI" "$CREWAI_PYTHON" -m pytest -q tests/crewai
fi

echo "== summary"
printf '%s\n' "${SUMMARY[@]}"
echo "total: $PASSED passed, $FAILED failed"
exit "$STATUS"
