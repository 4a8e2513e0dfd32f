"""spark-submit entry point of the ingest step: `spark-submit jobs/ingest.py --help`."""

import sys

from pielake.pipeline.jobs import main

if __name__ == "__main__":
    sys.exit(main("ingest"))
