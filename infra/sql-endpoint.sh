#!/usr/bin/env bash
# The SQL endpoint: the Spark Thrift Server over a lake (`pielake serve`), for beeline, JDBC and ODBC clients.
#
#   infra/sql-endpoint.sh start [LAKE]     # prints the JDBC URL, jdbc:hive2://127.0.0.1:10000/default
#   infra/sql-endpoint.sh status [LAKE]
#   infra/sql-endpoint.sh beeline [LAKE] [beeline options…]   # e.g. -e "SELECT * FROM matches_aggressive_driving"
#   infra/sql-endpoint.sh stop [LAKE]      # TERM (the server closes its catalog), then KILL after 30 s
#
# LAKE defaults to ./lake. The catalog (embedded Derby), the log and the pid file live in LAKE/_catalog/.
# Settings: PIELAKE_SQL_HOST (127.0.0.1), PIELAKE_SQL_PORT (10000), PIELAKE_SQL_REFRESH (30 s between looks for
# new tables), PIELAKE_SPARK_MASTER (local[*]); an external metastore: PIELAKE_SQL_ARGS="--metastore-url …
# --metastore-driver … --metastore-user … --packages …" with the password in PIELAKE_METASTORE_PASSWORD.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PIELAKE_PYTHON:-$ROOT/.venv/bin/python}
PIELAKE=$(dirname "$PY")/pielake
COMMAND=${1:-}
shift || true
LAKE_ARG=${ROOT}/lake
if [[ $# -gt 0 && $1 != -* ]]; then
  LAKE_ARG=$1
  shift
fi
LAKE=$(mkdir -p "$LAKE_ARG" && cd "$LAKE_ARG" && pwd)
STATE=$LAKE/_catalog
HOST=${PIELAKE_SQL_HOST:-127.0.0.1}
PORT=${PIELAKE_SQL_PORT:-10000}
URL=jdbc:hive2://$HOST:$PORT/default
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$PY}

running() {
  [[ -f "$STATE/endpoint.pid" ]] && kill -0 "$(cat "$STATE/endpoint.pid")" 2>/dev/null
}

start() {
  if running; then
    echo "already running: $URL" >&2
    exit 1
  fi
  mkdir -p "$STATE"
  # shellcheck disable=SC2086  # PIELAKE_SQL_ARGS is a list of options
  nohup "$PIELAKE" serve --lake "$LAKE" --host "$HOST" --port "$PORT" --refresh "${PIELAKE_SQL_REFRESH:-30}" \
    ${PIELAKE_SQL_ARGS:-} >"$STATE/endpoint.log" 2>&1 &
  echo $! >"$STATE/endpoint.pid"
  for _ in $(seq 1 240); do
    if grep -q "^ready: " "$STATE/endpoint.log"; then
      echo "$URL"
      return
    fi
    if ! running; then
      echo "the endpoint stopped while starting: $(grep '^error: ' "$STATE/endpoint.log" || tail -n 5 "$STATE/endpoint.log")" >&2
      rm -f "$STATE/endpoint.pid"
      exit 1
    fi
    sleep 1
  done
  echo "the endpoint did not come up in 240 s; log: $STATE/endpoint.log" >&2
  stop
  exit 1
}

stop() {
  [[ -f "$STATE/endpoint.pid" ]] || return 0
  local pid
  pid=$(cat "$STATE/endpoint.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$STATE/endpoint.pid"
}

status() {
  if running; then echo "serving $LAKE at $URL"; else echo "not running (lake $LAKE)"; exit 1; fi
}

beeline() {  # the beeline that pyspark ships, connected to this endpoint
  local spark_home
  spark_home=$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
  exec "$spark_home/bin/beeline" -u "$URL" "$@"
}

case "$COMMAND" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  beeline) beeline "$@" ;;
  *) echo "usage: $0 start|status|beeline|stop [LAKE] [beeline options…]" >&2; exit 2 ;;
esac
