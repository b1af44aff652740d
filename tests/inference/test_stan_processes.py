"""symlib.inference.stan_processes's clean-up of socket litter (no Stan compile needed)."""

import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from symlib.inference import stan_processes as sp


@pytest.fixture
def temp():
    """A short temporary folder (a Unix socket's path has at most 107 bytes)."""
    path = Path(tempfile.mkdtemp(prefix="st-"))
    yield path
    for item in sorted(path.rglob("*"), reverse=True):
        item.rmdir() if item.is_dir() else item.unlink()
    path.rmdir()


@pytest.mark.skipif(not Path("/proc/net/unix").exists(), reason="bound sockets known on Linux")
def test_litter_of_dead_processes_goes_and_live_sockets_stay(temp):
    """httpstan left one ``httpstan_*.sock`` per chain in the temp folder, and a killed process
    leaves its socket folder: both go at the next start; what is still in use stays."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()                                    # its pid is now free
    dead = temp / f"{sp.SOCKET_PREFIX}{child.pid}"
    dead.mkdir()
    (dead / "abcd1234.sock").write_bytes(b"")
    alive = temp / f"{sp.SOCKET_PREFIX}{os.getpid()}"
    alive.mkdir()
    unbound = temp / "httpstan_old.sock"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(unbound))                     # closed without unlink, as httpstan does
    not_a_socket = temp / "httpstan_notes.sock"
    not_a_socket.write_text("someone's file")
    listening = temp / "httpstan_live.sock"
    with socket.socket(socket.AF_UNIX) as live:
        live.bind(str(listening))
        live.listen(1)
        removed = sp.remove_stale(temp)
        assert sorted(removed) == sorted([dead, unbound])
        assert alive.is_dir() and listening.exists() and not_a_socket.exists()
