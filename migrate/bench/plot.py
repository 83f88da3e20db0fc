"""The optional PNG of latency per image and allocator transient peak against the batch size
(matplotlib, the `plot` extra)."""

from __future__ import annotations

import os

from migrate.bench.sides import BASELINE
from ssd_mobilenet import atomic_write
from ssd_mobilenet.errors import OutputExistsError
from ssd_mobilenet.errors import InputError

PLOT_EXTRA = "pip install 'ssd-mobilenet-migrate[plot]'"


def plot_available() -> bool:
    """Whether matplotlib (the optional `plot` extra) can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def check_plot(path: str, num_batches: int) -> None:
    """Raises InputError when a plot to `path` cannot be drawn: no matplotlib (the
    optional `plot` extra), or fewer than two batch sizes to plot against."""
    if not plot_available():
        raise InputError(f"{path}: no matplotlib ({PLOT_EXTRA})")
    if num_batches < 2:
        raise InputError(f"{path}: plots against the batch size: give two or more (--batch 1,8)")


def write_plot(report: dict, path: str, force: bool = False) -> None:
    """A PNG of latency per image and allocator transient peak against the batch size, one line
    per side, at the report's first image size and oneDNN setting (atomic write).

    Raises:
      InputError: matplotlib is not installed (the optional `plot` extra), `path` exists
        without `force`, or the report has fewer than two batch sizes.
    """
    check_plot(path, len(report["batches"]))
    if os.path.exists(path) and not force:
        raise OutputExistsError(f"{path}: exists (use --force to replace it)")
    import io

    import matplotlib.ticker
    from matplotlib.figure import Figure  # not pyplot: no display backend, no global state touched

    size, label = report["sizes"][0], report["onednn"][0]
    rows = [r for r in report["rows"] if r["size"] == size and r["onednn"] == label]
    fig = Figure(figsize=(10, 4), dpi=100)
    latency, memory = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    for side in report["sides"]:
        mine = sorted((r for r in rows if r["side"] == side), key=lambda r: r["batch"])
        if not mine:  # a TFLite side, measured at the model's size only
            continue
        batches = [r["batch"] for r in mine]
        style = {"marker": "o", "linewidth": 2.5 if side == BASELINE else 1.5}
        latency.plot(batches, [r["latency_ms"]["median"] / r["batch"] for r in mine], label=side, **style)
        mem = [(r["batch"], r["alloc_transient_bytes"] / 2**20) for r in mine if r.get("alloc_transient_bytes")]
        if mem:
            memory.plot(*zip(*mem), label=side, **style)
    for ax, title in ((latency, "median latency per image (ms)"), (memory, "allocator transient peak (MiB)")):
        ax.set_xscale("log", base=2)
        ax.set_xticks(report["batches"], [str(b) for b in report["batches"]])
        ax.set_xlabel("batch size")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.set_yscale("log")
        ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(matplotlib.ticker.ScalarFormatter())  # 20, not 2x10^1
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    latency.legend(fontsize=7)
    fig.suptitle(f"TF1 session vs converted TF2 model, {size[0]}x{size[1]}, {report['device']}, "
                 f"TensorFlow {report['tensorflow']}")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png")
    atomic_write.write_bytes(path, buffer.getvalue())
