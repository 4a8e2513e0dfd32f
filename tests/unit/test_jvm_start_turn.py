"""JVM starts on one machine take turns: two resolving Delta's jars into an empty Ivy cache at once break both."""

from __future__ import annotations

import subprocess
import sys
import time

from pielake.engine.session import _jvm_start

WAITER = """
from pielake.engine.session import _jvm_start
print("asking", flush=True)
with _jvm_start():
    print("started")
"""


def test_a_second_process_waits_for_the_turn_of_the_first() -> None:
    with _jvm_start():
        waiter = subprocess.Popen([sys.executable, "-c", WAITER], stdout=subprocess.PIPE, text=True)
        assert waiter.stdout.readline().strip() == "asking"
        time.sleep(1)
        assert waiter.poll() is None, "the second process started while the first held the turn"
    assert waiter.communicate(timeout=30)[0].strip() == "started"
