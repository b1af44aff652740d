"""tests/pinned.py: which processor a golden file's set of numbers belongs to."""

from pathlib import Path

import torch

from tests.pinned import cpu_vendor, platform_id


def test_the_vendor_is_read_from_cpuinfo(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\n\n"
                    "processor\t: 1\nvendor_id\t: AuthenticAMD\n")
    assert cpu_vendor(info) == "AuthenticAMD"


def test_an_arm_cpuinfo_names_its_implementer(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n")
    assert cpu_vendor(info) == "0x41"


def test_without_cpuinfo_the_vendor_is_still_a_name(tmp_path):
    vendor = cpu_vendor(tmp_path / "absent")
    assert isinstance(vendor, str) and vendor


def test_the_platform_names_torch_its_kernels_and_the_vendor():
    here = platform_id()
    assert here == {"torch": torch.__version__, "cpu capability": torch.backends.cpu.get_cpu_capability(),
                    "cpu vendor": cpu_vendor(Path("/proc/cpuinfo"))}
