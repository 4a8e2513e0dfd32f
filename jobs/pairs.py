"""spark-submit entry point of the pairs step: `spark-submit jobs/pairs.py --help`."""

import sys

from pielake.pipeline.jobs import main

if __name__ == "__main__":
    sys.exit(main("pairs"))
