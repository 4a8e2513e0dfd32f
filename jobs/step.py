"""spark-submit entry point of every step of a pielake run: `spark-submit jobs/step.py --help`."""

import sys

from pielake.pipeline.jobs import main

if __name__ == "__main__":
    sys.exit(main())
