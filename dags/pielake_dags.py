"""Airflow DAG file: two DAGs per registered query (`pielake_<name>`, `pielake_<name>_backfill`).

The registry is the folder `PIELAKE_QUERIES` (default: examples/queries); the lake is `PIELAKE_LAKE` (default:
./lake). How the DAGs are built: `pielake/orchestration/airflow.py`.
"""

import os
from pathlib import Path

from pielake.orchestration.airflow import PROJECT, build_dags

globals().update(build_dags(Path(os.environ.get("PIELAKE_QUERIES", PROJECT / "examples" / "queries"))))
