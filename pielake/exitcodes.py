"""Exit codes of every pielake command, named in one place (as sqlfluff does)."""

EXIT_OK = 0  # done, nothing to report
EXIT_FINDINGS = 1  # ran, and found something the user must act on (a failed data-quality gate)
EXIT_USAGE = 2  # the user's input is wrong: a bad query, a missing file, a bad option
EXIT_BUSY = 3  # another run of the same query holds its lock: try again when it has finished
EXIT_OVER = 4  # the step's run ended (a gate stopped it) at a step before it: the step has nothing to do
EXIT_UNAVAILABLE = 69  # the engine does not answer (EX_UNAVAILABLE): start it, or try again when it is back
EXIT_INTERNAL = 70  # a bug in pielake (EX_SOFTWARE): the message says what broke, the log has the trace
EXIT_JVM_LOST = 71  # Spark's JVM ended in the middle of a command (EX_OSERR): killed, as a rule for memory
EXIT_NO_SPACE = 74  # a disk the run writes to is full (EX_IOERR): free space there and run again
EXIT_INTERRUPTED = 130  # stopped by Ctrl-C (128 + SIGINT, as a shell counts it)
