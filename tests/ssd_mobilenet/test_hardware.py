"""Which machines have units for a reduced precision (`ssd_mobilenet.hardware`), read from
/proc/cpuinfo excerpts of real CPUs and GPU compute capabilities."""

import pytest

from tests.conftest import SKYLAKE_SP
from ssd_mobilenet import hardware

# Excerpts of /proc/cpuinfo (the lines that matter) of real CPUs, besides conftest's Skylake-SP.
ZEN4 = """processor\t: 0
vendor_id\t: AuthenticAMD
model name\t: AMD EPYC 9R14
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512dq avx512_bf16 avx512_vnni avx512_bitalg avx512_vpopcntdq
"""
SAPPHIRE_RAPIDS = """processor\t: 0
vendor_id\t: GenuineIntel
model name\t: Intel(R) Xeon(R) Platinum 8488C
flags\t\t: fpu sse sse2 avx avx2 fma avx512f avx512_bf16 avx512_fp16 amx_bf16 amx_tile amx_int8 avx512_vnni
"""
GRAVITON3 = """processor\t: 0
BogoMIPS\t: 2100.00
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm jscvt fcma lrcpc dcpop sha3 sve svebf16 i8mm bf16 dgh rng
CPU implementer\t: 0x41
"""


def test_flags_are_read_from_x86_and_arm_lines():
    assert {"avx512f", "avx512bw"} <= hardware.cpu_flags(SKYLAKE_SP)
    assert "bf16" in hardware.cpu_flags(GRAVITON3) and "sve" in hardware.cpu_flags(GRAVITON3)
    assert hardware.cpu_flags("processor\t: 0\nmodel name\t: x\n") == set()


@pytest.mark.parametrize("cpuinfo, bfloat16, float16", [
    (SKYLAKE_SP, False, False),   # AVX-512 without BF16 or FP16: both emulated
    (ZEN4, True, False),          # AVX512-BF16
    (SAPPHIRE_RAPIDS, True, True),  # AMX-BF16, AVX512-FP16
    (GRAVITON3, True, False),     # Arm BF16 extension
])
def test_cpus_with_and_without_units(cpuinfo, bfloat16, float16):
    for precision, has in (("mixed_bfloat16", bfloat16), ("mixed_float16", float16)):
        why = hardware.missing_units(precision, cpuinfo=cpuinfo, gpus=[])
        assert (why is None) == has, (precision, why)
        if why:
            kind = precision.split("_")[1]
            assert f"no {kind} units" in why and "compute capability" in why
    assert hardware.missing_units("float32", cpuinfo=SKYLAKE_SP, gpus=[]) is None


def test_a_gpu_provides_the_units_by_its_compute_capability():
    # Turing (7.5) has float16 tensor cores but no bfloat16; Ampere (8.0) has both.
    assert hardware.missing_units("mixed_float16", cpuinfo=SKYLAKE_SP, gpus=[(7, 5)]) is None
    assert hardware.missing_units("mixed_bfloat16", cpuinfo=SKYLAKE_SP, gpus=[(7, 5)]) is not None
    assert hardware.missing_units("mixed_bfloat16", cpuinfo=SKYLAKE_SP, gpus=[(8, 0)]) is None
    assert hardware.missing_units("mixed_float16", cpuinfo=SKYLAKE_SP, gpus=[(6, 1)]) is not None


def test_an_unreadable_cpuinfo_says_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(hardware, "CPUINFO", str(tmp_path / "absent"))
    assert hardware.missing_units("mixed_bfloat16", gpus=[]) is None
    assert hardware.missing_units("mixed_bfloat16", cpuinfo="", gpus=[]) is None
