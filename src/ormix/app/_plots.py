"""Figures of evaluations: a summary's pass@k per member, a comparison's differences (matplotlib, Agg).

matplotlib (the `plot` extra) is imported inside each function; the caller saves and closes the figure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _errors(metrics: list[Mapping[str, Any]]) -> tuple[list[float], list[list[float]]]:
    values, below, above = [], [], []
    for m in metrics:
        value = m.get("value")
        values.append(float("nan") if value is None else value)
        low, high = m.get("low"), m.get("high")
        below.append(0.0 if value is None or low is None else max(value - low, 0.0))
        above.append(0.0 if value is None or high is None else max(high - value, 0.0))
    return values, [below, above]


def summary_figure(summary: Mapping[str, Any], title: str | None = None) -> Any:
    """Per member, a bar for each pass@k (and a lighter one for pass^k, k > 1) with its interval as whiskers.

    Example:
        >>> from ormix.evaluation._summary import summarize
        >>> recs = [{"member": m, "task_index": t, "outcome": "scored", "env_reward": float(t % 2)}
        ...         for m in ("a", "b") for t in range(4) for _ in range(2)]
        >>> fig = summary_figure(summarize(recs, ks=(1, 2)))
        >>> [ax.get_title() for ax in fig.axes], [t.get_text() for t in fig.axes[0].get_xticklabels()]
        (['pass@1', 'pass@2'], ['a', 'b'])
        >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    plt = pyplot()
    members = list(summary["members"])
    ks = list(summary["k"])
    fig, axes = plt.subplots(
        1, len(ks), figsize=(max(4.0, 1.2 * len(members) + 2.0) * len(ks), 4.0), squeeze=False, sharey=True
    )
    width = 0.38
    for ax, k in zip(axes[0], ks, strict=True):
        xs = list(range(len(members)))
        # pass^1 is pass@1: one bar for k = 1.
        bars = (
            [(0.0, "pass@1", 0.9)]
            if k == 1
            else [(-width / 2, f"pass@{k}", 0.9), (width / 2, f"pass^{k}", 0.45)]
        )
        for offset, name, alpha in bars:
            values, errors = _errors([summary["members"][m][name] for m in members])
            ax.bar(
                [x + offset for x in xs],
                values,
                width,
                yerr=errors,
                capsize=4,
                alpha=alpha,
                color="C0",
                label=name,
            )
        ax.set_xticks(xs, members)
        ax.set_ylim(0.0, 1.05)
        ax.set_title(f"pass@{k}")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(loc="upper right", fontsize="small")
    axes[0][0].set_ylabel(f"per-task mean ({summary['confidence']:.0%} interval over tasks)")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig


def comparison_figure(result: Mapping[str, Any]) -> Any:
    """Per member, each compared eval's difference from the baseline with its paired interval, one panel
    per compared metric, a line at zero.

    Example:
        >>> from pathlib import Path
        >>> from ormix.app._compare import EvalData, compare
        >>> rec = lambda t, w: {"member": "a", "task_index": t, "outcome": "scored", "env_reward": w}
        >>> r = compare([EvalData(Path("x"), {}, [rec(t, 0.0) for t in range(8)]),
        ...              EvalData(Path("y"), {}, [rec(t, 1.0) for t in range(8)])])
        >>> fig = comparison_figure(r)
        >>> fig.axes[0].get_title(), fig.axes[0].get_xlabel()
        ('pass@1', 'difference from x')
        >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    plt = pyplot()
    metrics = list(result["metrics"])
    comparisons = list(result["comparisons"])
    members = sorted({m for comp in comparisons for m in comp["members"]})
    fig, axes = plt.subplots(
        1, len(metrics), figsize=(4.5 * len(metrics), max(2.5, 0.6 * len(members) + 1.5)), squeeze=False
    )
    step = 0.8 / max(len(comparisons), 1)
    for ax, name in zip(axes[0], metrics, strict=True):
        for i, comp in enumerate(comparisons):
            ys, diffs = [], []
            for j, member in enumerate(members):
                if member in comp["members"]:
                    ys.append(j + (i - (len(comparisons) - 1) / 2) * step)
                    diffs.append(comp["members"][member]["metrics"][name]["difference"])
            values, errors = _errors(diffs)
            ax.errorbar(values, ys, xerr=errors, fmt="o", capsize=4, color=f"C{i}", label=comp["label"])
        ax.axvline(0.0, color="0.3", linewidth=1)
        ax.set_yticks(range(len(members)), members)
        ax.set_ylim(len(members) - 0.5, -0.5)
        ax.set_title(name)
        ax.set_xlabel(f"difference from {result['baseline']['label']}")
        ax.grid(axis="x", alpha=0.3)
        if len(comparisons) > 1:
            ax.legend(loc="best", fontsize="small")
    # Groups of runs: the intervals cover seed-to-seed variance too, and the title must not say otherwise.
    covers = "seeds and tasks" if result.get("covers") == "seeds and tasks" else "common tasks"
    fig.suptitle(f"{result['confidence']:.0%} paired intervals over {covers}", fontsize="medium")
    fig.tight_layout()
    return fig


def study_heatmap(study: Mapping[str, Any], metric: str | None = None) -> Any:
    """An ablation study's arm × member matrix (`ormix.app._study`): the cell colour is ``metric``
    (default the study's, e.g. pass@1), each cell annotated with its value and interval; an arm not done is
    left blank and says so.

    Example:
        >>> study = {"metric": "pass@1", "members": ["a", "b"], "mixture": "m",
        ...          "arms": [{"name": "full", "done": True}, {"name": "without-a", "done": False}],
        ...          "matrix": {"full": {"a": {"pass@1": {"value": 0.5, "low": 0.2, "high": 0.8, "n": 4}}}}}
        >>> fig = study_heatmap(study)
        >>> [t.get_text() for t in fig.axes[0].texts]
        ['0.50\\n[0.20, 0.80]', '-', 'not done', 'not done']
        >>> import matplotlib.pyplot as plt; plt.close("all")
    """
    import numpy as np

    from ormix.evaluation._summary import format_metric

    plt = pyplot()
    metric = metric or study["metric"]
    members, arms = list(study["members"]), list(study["arms"])
    values = np.full((len(arms), len(members)), np.nan)
    labels = [["not done"] * len(members) for _ in arms]
    for i, arm in enumerate(arms):
        if not arm.get("done"):
            continue
        cells = study["matrix"].get(arm["name"], {})
        for j, member in enumerate(members):
            cell = cells.get(member, {}).get(metric)
            labels[i][j] = format_metric(cell).replace(" [", "\n[")
            if cell and cell.get("value") is not None:
                values[i, j] = cell["value"]
    fig, ax = plt.subplots(figsize=(2.0 + 1.7 * len(members), 1.4 + 0.7 * len(arms)))
    image = ax.imshow(np.ma.masked_invalid(values), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
    ax.set_xticks(range(len(members)), members)
    ax.set_yticks(range(len(arms)), [a["name"] for a in arms])
    for i in range(len(arms)):
        for j in range(len(members)):
            dark = not np.isnan(values[i, j]) and values[i, j] < 0.6
            ax.text(
                j, i, labels[i][j], ha="center", va="center", fontsize=8, color="white" if dark else "black"
            )
    ax.set_xlabel("evaluated on (member)")
    ax.set_ylabel("arm (trained on)")
    ax.set_title(f"{study.get('mixture', '')}: {metric}", fontsize="medium")
    # With several training seeds a cell pools them: its interval covers seeds too, as study.md says.
    covered = {
        cell.get("covers")
        for per_arm in study["matrix"].values()
        for per_member in per_arm.values()
        if isinstance(cell := per_member.get(metric), Mapping)
    }
    pooled = "seeds and tasks" in covered or len(study.get("seeds") or []) > 1
    covers = "seeds and tasks" if pooled else "tasks"
    fig.colorbar(image, ax=ax, label=f"{metric} ({study.get('confidence', 0.95):.0%} interval over {covers})")
    fig.tight_layout()
    return fig
