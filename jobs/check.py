"""spark-submit entry point of the check step: `spark-submit jobs/check.py --help`."""

import sys

from pielake.pipeline.jobs import main

if __name__ == "__main__":
    sys.exit(main("check"))
