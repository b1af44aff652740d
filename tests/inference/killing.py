"""A helper of the kill-and-resume tests: run a script in a child Python, SIGKILL it once it has
written its first checkpoint (and run on a little), and return its exit status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path


def kill_after_checkpoint(script: str, checkpoint: Path, linger_s: float = 0.5, wait_s: float = 120.0) -> int:
    """Start ``script`` (dedented) with this checkout on its path; once ``checkpoint`` exists,
    wait ``linger_s`` and kill it with SIGKILL. Returns the child's return code (``-SIGKILL``
    when it was killed, as the tests require)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(Path.cwd()), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-c", textwrap.dedent(script)], env=env)
    try:
        deadline = time.time() + wait_s
        while not Path(checkpoint).is_file() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(linger_s)
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    finally:
        proc.kill()
    return proc.returncode
