#!/usr/bin/env bash
# Airflow standalone on this machine for the pielake DAGs: scheduler, triggerer, API server and DAG processor in one
# process, with its home and SQLite metadata DB under the lake folder, so one folder holds a whole deployment.
#
#   infra/airflow-local.sh [LAKE_DIR]        # default: ./lake; the UI is on http://localhost:8080
#
# The registered queries are PIELAKE_QUERIES (default: examples/queries). Their steps run on the lake's engine,
# which this starts unless one runs already (`pielake engine stop --lake LAKE_DIR` stops it), through the
# connection pielake_engine; a query registered with `runner: spark-submit` runs its steps on spark_default,
# local[*] unless AIRFLOW_CONN_SPARK_DEFAULT says otherwise (e.g. '{"conn_type": "spark", "host": "spark://h:7077"}').
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
LAKE="$(mkdir -p "${1:-$ROOT/lake}" && cd "${1:-$ROOT/lake}" && pwd)"
export AIRFLOW_HOME="$LAKE/_airflow"
export AIRFLOW__CORE__DAGS_FOLDER="$ROOT/dags"
export AIRFLOW__CORE__LOAD_EXAMPLES=False
export PIELAKE_LAKE="$LAKE"
export PIELAKE_QUERIES="${PIELAKE_QUERIES:-$ROOT/examples/queries}"
export AIRFLOW_CONN_SPARK_DEFAULT="${AIRFLOW_CONN_SPARK_DEFAULT:-{\"conn_type\": \"spark\", \"host\": \"local[*]\"}}"
export PYSPARK_PYTHON="$ROOT/.venv/bin/python"
export PATH="$ROOT/.venv/bin:$PATH"   # spark-submit and airflow from the project's environment
# The deployment's Airflow settings (infra/airflow.env), each unless your environment sets it already.
while IFS='=' read -r key value; do
  [[ $key =~ ^AIRFLOW__[A-Z_]+$ ]] && export "$key=${!key:-$value}"
done < "$ROOT/infra/airflow.env"
mkdir -p "$AIRFLOW_HOME"
# Fetch Delta's jars into the Ivy cache now, alone: the PiePair tasks start their spark-submits at once, and two
# JVMs downloading into an empty cache at the same time break each other's download.
python -c "from pielake.engine.session import delta_package, resolve_jars; resolve_jars([delta_package()])"
pielake engine status --lake "$LAKE" >/dev/null 2>&1 || pielake engine start --lake "$LAKE"
AIRFLOW_CONN_PIELAKE_ENGINE=$(python -c "import sys; from pielake.engine.client import lake_engine
print(lake_engine(sys.argv[1]).airflow_connection())" "$LAKE")
export AIRFLOW_CONN_PIELAKE_ENGINE
exec airflow standalone
