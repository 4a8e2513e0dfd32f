"""spark-submit entry point of the matches step: `spark-submit jobs/matches.py --help`."""

import sys

from pielake.pipeline.jobs import main

if __name__ == "__main__":
    sys.exit(main("matches"))
