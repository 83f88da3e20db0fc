"""Whether this machine has arithmetic units for a reduced compute precision.

`mixed_bfloat16` is fast where the hardware multiplies bfloat16: x86 CPUs with AVX512-BF16 or
AMX-BF16 (`avx512_bf16`, `amx_bf16` in /proc/cpuinfo), Arm CPUs with the BF16 extension (`bf16`),
GPUs of compute capability 8.0 and later. `mixed_float16` is fast on GPUs of compute capability
7.0 and later (tensor cores) and on x86 CPUs with AMX-FP16 or AVX512-FP16. Elsewhere TensorFlow
still runs the model, converting or emulating, slower than in float32 (docs/measurements.md),
so the commands say so in one line rather than let a user deploy the slower model unawares.
"""

from __future__ import annotations

# precision -> (what the units multiply, CPU flags that provide them, least GPU compute capability)
UNITS = {
    "mixed_bfloat16": ("bfloat16", ("avx512_bf16", "amx_bf16", "bf16"), (8, 0)),
    "mixed_float16": ("float16", ("amx_fp16", "avx512_fp16"), (7, 0)),
}
CPUINFO = "/proc/cpuinfo"


def read_cpuinfo() -> str | None:
    """This machine's /proc/cpuinfo text; None where there is none (macOS, Windows)."""
    try:
        with open(CPUINFO, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError:
        return None


def cpu_flags(cpuinfo: str) -> set:
    """The instruction-set flags of a /proc/cpuinfo text: x86's `flags` lines, Arm's `Features`."""
    flags = set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return flags


def gpu_capabilities() -> list:
    """(major, minor) compute capabilities of the visible GPUs; lists devices without starting them."""
    import tensorflow as tf

    capabilities = []
    for gpu in tf.config.list_physical_devices("GPU"):
        capability = tf.config.experimental.get_device_details(gpu).get("compute_capability")
        if capability:
            capabilities.append(tuple(capability))
    return capabilities


def missing_units(precision: str, cpuinfo: str | None = None, gpus: list | None = None) -> str | None:
    """Why this machine has no units for `precision`, as one phrase; None when it has them, when
    the precision is float32, or when it cannot tell (no /proc/cpuinfo, or no flags in it).

    `cpuinfo` (a /proc/cpuinfo text) and `gpus` (compute capabilities) default to this machine's."""
    if precision not in UNITS:
        return None
    kind, flags_needed, least = UNITS[precision]
    gpus = gpu_capabilities() if gpus is None else gpus
    if any(tuple(c) >= least for c in gpus):
        return None
    cpuinfo = read_cpuinfo() if cpuinfo is None else cpuinfo
    flags = cpu_flags(cpuinfo or "")
    if not flags or flags & set(flags_needed):
        return None
    gpu = f"no GPU of compute capability {least[0]}.{least[1]} or later"
    return f"this machine has no {kind} units ({gpu}, no {', '.join(flags_needed)} among the CPU's flags)"
