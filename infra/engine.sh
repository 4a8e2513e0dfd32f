#!/usr/bin/env bash
# The lake's engine (`pielake engine`): one long-lived Spark application serving Spark Connect, pielake's runs
# and the JDBC/ODBC endpoint (the Spark Thrift Server) for beeline and BI tools.
#
#   infra/engine.sh start [LAKE]     # prints where it listens: sc://localhost:15002 (Spark Connect), ... (JDBC)
#   infra/engine.sh status [LAKE]
#   infra/engine.sh beeline [LAKE] [beeline options…]   # e.g. -e "SELECT * FROM matches_aggressive_driving"
#   infra/engine.sh stop [LAKE]      # TERM (the engine closes its servers and catalog), then KILL after 30 s
#
# LAKE defaults to ./lake. The engine's address (with its token), log and pid live in LAKE/_engine/, its catalog
# (embedded Derby) in LAKE/_catalog/. Settings: PIELAKE_ENGINE_HOST (127.0.0.1), PIELAKE_ENGINE_PORT (15002: Spark
# Connect; runs on the next port), PIELAKE_JDBC_PORT (10000), PIELAKE_ENGINE_REFRESH (30 s between looks for new
# tables), PIELAKE_SPARK_MASTER (local[*]), PIELAKE_ENGINE_TOKEN (default: a new random one); serving at once,
# without the warm-up: PIELAKE_ENGINE_ARGS="--warm-up 0"; an external
# metastore: PIELAKE_ENGINE_ARGS="--metastore-url … --metastore-driver … --metastore-user … --packages …" with the
# password in PIELAKE_METASTORE_PASSWORD.
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
HOST=${PIELAKE_ENGINE_HOST:-127.0.0.1}
JDBC_PORT=${PIELAKE_JDBC_PORT:-10000}
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$PY}

beeline() {  # the beeline that pyspark ships, connected to the engine's JDBC endpoint
  local spark_home
  spark_home=$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
  exec "$spark_home/bin/beeline" -u "jdbc:hive2://$HOST:$JDBC_PORT/default" "$@"
}

case "$COMMAND" in
  start)
    # shellcheck disable=SC2086  # PIELAKE_ENGINE_ARGS is a list of options
    exec "$PIELAKE" engine start --lake "$LAKE" --host "$HOST" --port "${PIELAKE_ENGINE_PORT:-15002}" \
      --jdbc-port "$JDBC_PORT" --refresh "${PIELAKE_ENGINE_REFRESH:-30}" ${PIELAKE_ENGINE_ARGS:-} ;;
  status) exec "$PIELAKE" engine status --lake "$LAKE" ;;
  stop) exec "$PIELAKE" engine stop --lake "$LAKE" ;;
  beeline) beeline "$@" ;;
  *) echo "usage: $0 start|status|beeline|stop [LAKE] [beeline options…]" >&2; exit 2 ;;
esac
