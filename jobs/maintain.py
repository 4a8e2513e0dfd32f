"""spark-submit entry point of table maintenance: `spark-submit jobs/maintain.py QUERY_FILE --lake DIR`, the same as
`pielake maintain` (`--help`)."""

import sys

from pielake.cli import main

if __name__ == "__main__":
    main(["maintain", *sys.argv[1:]], prog_name="jobs/maintain.py")
