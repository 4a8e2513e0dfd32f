"""spark-submit entry point of the situations step: `spark-submit jobs/situations.py --help`."""

import sys

from pielake.pipeline.jobs import main

if __name__ == "__main__":
    sys.exit(main("situations"))
