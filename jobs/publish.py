"""spark-submit entry point of the publish step: `spark-submit jobs/publish.py --help`."""

import sys

from pielake.pipeline.jobs import main

if __name__ == "__main__":
    sys.exit(main("publish"))
