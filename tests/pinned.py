"""What numbers pinned bit for bit in ``tests/golden/`` depend on besides the code.

torch's CPU kernels are chosen by its version and the instructions it detects
(``torch.backends.cpu.get_cpu_capability()``), but its matrix products go to Intel's MKL and
oneDNN, which choose their own kernels by the processor's vendor too: the same torch on an AMD
and an Intel CPU that both report ``AVX512`` rounds the last bits of a fit differently. A golden
file therefore pins one set of numbers per platform (:func:`platform_id`), and a test finds the
set of the machine it runs on, or is skipped, saying so.
"""

from __future__ import annotations

import platform
from pathlib import Path

import torch

__all__ = ["cpu_vendor", "platform_id"]


def cpu_vendor(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The processor's vendor string (``GenuineIntel``, ``AuthenticAMD``) from ``cpuinfo`` on
    Linux; elsewhere what :func:`platform.processor` says (``arm``, ``i386``), or ``unknown``."""
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("vendor_id", "CPU implementer") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def platform_id() -> dict:
    """torch's version, the CPU instructions its kernels use and the processor's vendor."""
    return {"torch": torch.__version__, "cpu capability": torch.backends.cpu.get_cpu_capability(),
            "cpu vendor": cpu_vendor()}
