"""Exit codes of every pielake command, named in one place (as sqlfluff does)."""

EXIT_OK = 0  # done, nothing to report
EXIT_FINDINGS = 1  # ran, and found something the user must act on (a failed data-quality gate)
EXIT_USAGE = 2  # the user's input is wrong: a bad query, a missing file, a bad option
EXIT_BUSY = 3  # another run of the same query holds its lock: try again when it has finished
