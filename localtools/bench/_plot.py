"""``localtools bench --plot``: accuracy and latency per mode, grouped by category."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .._errors import MissingDependency

__all__ = ["plot_call_curve", "plot_summary", "pyplot"]


def pyplot() -> Any:
    """matplotlib's pyplot on a file-only backend, or an install hint."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only; never a window
        import matplotlib.pyplot as plt
    except ImportError as exc:
        raise MissingDependency("--plot needs matplotlib: pip install 'localtools[bench]'") from exc
    return plt


def plot_summary(rows: list[dict[str, Any]], path: str | Path, *, title: str = "") -> Path:
    """Two panels, one bar per mode in each category group: accuracy, and latency p50 with a p95 whisker."""
    plt = pyplot()

    modes = list(dict.fromkeys(r["mode"] for r in rows))
    categories = list(dict.fromkeys(r["category"] for r in rows))
    # "all" last, however the rows came.
    categories = [c for c in categories if c != "all"] + (["all"] if "all" in categories else [])
    cell = {(r["mode"], r["category"]): r for r in rows}
    width = 0.8 / max(len(modes), 1)
    fig, (acc_ax, lat_ax) = plt.subplots(2, 1, figsize=(max(9.0, 1.8 * len(categories) * max(1, len(modes) / 3)), 8),
                                         sharex=True)
    for i, mode in enumerate(modes):
        xs = [c + (i - (len(modes) - 1) / 2) * width for c in range(len(categories))]
        got = [cell.get((mode, cat)) for cat in categories]
        bars = acc_ax.bar(xs, [100 * r["accuracy"] if r else 0 for r in got], width, label=mode)
        acc_ax.bar_label(bars, fmt="%.0f", fontsize="x-small", padding=1)
        p50 = [(r or {}).get("latency_p50") or 0.0 for r in got]
        p95 = [(r or {}).get("latency_p95") or 0.0 for r in got]
        lat_ax.bar(xs, p50, width, label=mode)
        lat_ax.errorbar(xs, p50, yerr=[[0] * len(p50), [max(b - a, 0) for a, b in zip(p50, p95, strict=True)]],
                        fmt="none", ecolor="black", capsize=2, linewidth=0.8)
    acc_ax.set_ylabel("AST accuracy (%)")
    acc_ax.set_ylim(0, 100)
    acc_ax.grid(axis="y", alpha=0.3)
    acc_ax.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.0, 1.0))
    lat_ax.set_ylabel("latency p50 (s), whisker to p95")
    lat_ax.grid(axis="y", alpha=0.3)
    lat_ax.set_xticks(range(len(categories)), categories, rotation=15, ha="right")
    if title:
        fig.suptitle(title)
    return _save(plt, fig, path)


def plot_call_curve(curve: list[dict[str, Any]], path: str | Path, *, chosen: float | None = None,
                    title: str = "") -> Path:
    """The call decision per threshold: the share of cases that expect a call and still call,
    against the share of cases that expect none and call anyway (lower is better)."""
    plt = pyplot()

    xs = [r["threshold"] for r in curve]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.plot(xs, [100 * r["needed_called"] / max(r["needed"], 1) for r in curve], marker="o",
            label=f"calls where one is expected ({curve[0]['needed'] if curve else 0} cases)")
    ax.plot(xs, [100 * r["unneeded_called"] / max(r["unneeded"], 1) for r in curve], marker="s",
            label=f"calls where none is expected ({curve[0]['unneeded'] if curve else 0} cases)")
    if chosen is not None:
        ax.axvline(chosen, color="grey", linestyle="--", linewidth=0.8, label=f"chosen {chosen:g}")
    ax.set_xlabel("call threshold (the call branch's share of the model's probability)")
    ax.set_ylabel("cases that call (%)")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize="small")
    if title:
        ax.set_title(title)
    return _save(plt, fig, path)


def _save(plt: Any, fig: Any, path: str | Path) -> Path:
    """``fig`` laid out and written to ``path``, then closed (pyplot keeps every open figure)."""
    fig.tight_layout()
    out = Path(path)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
