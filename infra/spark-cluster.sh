#!/usr/bin/env bash
# A Spark standalone cluster on this machine, from the Spark that pyspark ships: one master, two workers.
#
#   infra/spark-cluster.sh start     # prints the master URL, spark://127.0.0.1:7077 (UI: http://127.0.0.1:8080)
#   infra/spark-cluster.sh status
#   infra/spark-cluster.sh stop      # TERM, then KILL after 10 s; removes the pid files
#
# Then: pielake run Q.tpq --events E --lake DIR --master spark://127.0.0.1:7077, or point Airflow's
# spark_default connection at it (host spark://127.0.0.1, port 7077). The lake must be a path every worker
# sees (here: the same disk). Settings: PIELAKE_CLUSTER_HOST, _PORT, _WORKERS (2), PIELAKE_WORKER_CORES (1),
# PIELAKE_WORKER_MEMORY (2g), PIELAKE_CLUSTER_DIR (logs, pid files; default .cluster/).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PIELAKE_PYTHON:-$ROOT/.venv/bin/python}
SPARK_HOME=${SPARK_HOME:-$("$PY" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')}
STATE=${PIELAKE_CLUSTER_DIR:-$ROOT/.cluster}
HOST=${PIELAKE_CLUSTER_HOST:-127.0.0.1}
PORT=${PIELAKE_CLUSTER_PORT:-7077}
UI_PORT=${PIELAKE_CLUSTER_UI_PORT:-8080}
WORKERS=${PIELAKE_CLUSTER_WORKERS:-2}
CORES=${PIELAKE_WORKER_CORES:-1}
MEMORY=${PIELAKE_WORKER_MEMORY:-2g}
export SPARK_HOME PYSPARK_PYTHON=${PYSPARK_PYTHON:-$PY}

launch() {  # name, main class, arguments: one JVM in the background (spark-class execs java, so $! is the JVM)
  local name=$1
  shift
  nohup "$SPARK_HOME/bin/spark-class" "$@" >"$STATE/$name.log" 2>&1 &
  echo $! >"$STATE/$name.pid"
}

alive_workers() {  # from the master's JSON status page; 0 while it is not up
  "$PY" -c "import json, sys, urllib.request
try:
    print(json.load(urllib.request.urlopen('http://$HOST:$UI_PORT/json/', timeout=2))['aliveworkers'])
except OSError:
    print(0)"
}

start() {
  if [[ -f "$STATE/master.pid" ]] && kill -0 "$(cat "$STATE/master.pid")" 2>/dev/null; then
    echo "already running: spark://$HOST:$PORT" >&2
    exit 1
  fi
  mkdir -p "$STATE"
  launch master org.apache.spark.deploy.master.Master --host "$HOST" --port "$PORT" --webui-port "$UI_PORT"
  for i in $(seq 1 "$WORKERS"); do
    launch "worker$i" org.apache.spark.deploy.worker.Worker --host "$HOST" --cores "$CORES" --memory "$MEMORY" \
      --work-dir "$STATE/work$i" --webui-port $((UI_PORT + i)) "spark://$HOST:$PORT"
  done
  for _ in $(seq 1 120); do
    if [[ $(alive_workers) -ge $WORKERS ]]; then
      echo "spark://$HOST:$PORT"
      return
    fi
    sleep 1
  done
  echo "the cluster did not come up in 120 s; logs in $STATE" >&2
  stop
  exit 1
}

stop() {
  local pid
  for file in "$STATE"/*.pid; do
    [[ -e "$file" ]] || continue
    pid=$(cat "$file")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 10); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    kill -9 "$pid" 2>/dev/null || true
    rm -f "$file"
  done
}

status() {
  echo "master spark://$HOST:$PORT: $(alive_workers) of $WORKERS workers alive"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) status ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
