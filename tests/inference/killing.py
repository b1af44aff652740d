"""A helper of the kill-and-resume tests: run a call of a test module in a child Python with one
library function slowed down, SIGKILL it once it has written its first checkpoint (and run on a
little), and return its exit status."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path


def kill_after_checkpoint(test_file: str, call: str, slowed: str, checkpoint: Path, linger_s: float = 0.5,
                          wait_s: float = 120.0) -> int:
    """In a child Python with this checkout on its path: import the test module ``test_file``
    as ``t``, make ``slowed`` (``"module:function"``) sleep 50 ms per call, and run ``call``
    (e.g. ``"t._run(path, every_s=0)"``). Once ``checkpoint`` exists, wait ``linger_s`` and kill
    the child with SIGKILL. Returns its return code (``-SIGKILL`` when it was killed)."""
    module, function = slowed.split(":")
    script = f"""
        import importlib, sys, time
        sys.path.insert(0, {str(Path(test_file).parent)!r})
        t = importlib.import_module({Path(test_file).stem!r})
        lib = importlib.import_module({module!r})
        slow = lib.{function}
        def slowed(*a, **k):          # slow enough to be killed mid-run
            time.sleep(0.05)
            return slow(*a, **k)
        lib.{function} = slowed
        {call}
    """
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
