"""The calibration benchmark, reduced: ormix's 95% intervals cover the truth about 95% of the time.

``benchmarks/eval_calibration.py`` runs every setting with 2000 repetitions (93–97% required); here two
settings with 300 (a figure's Monte Carlo error is about ±2.5% at two standard errors, hence the looser band).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARK = Path(__file__).resolve().parents[2] / "benchmarks" / "eval_calibration.py"


def _benchmark():
    spec = importlib.util.spec_from_file_location("eval_calibration", BENCHMARK)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_intervals_cover_the_truth_at_about_the_stated_confidence():
    setting = _benchmark().calibrate(tasks=16, samples=4, profile="mid", reps=300, seed=0)
    names = set(setting.figures)
    assert names == {f"pass@{k}{s}" for k in (1, 4) for s in ("", " paired \u0394=0", " paired \u0394+")}
    for figure in setting.figures.values():
        assert figure.reps == 300
        if figure.judged:
            assert 0.90 <= figure.coverage <= 0.99, (figure.name, figure.coverage)
    assert all(setting.figures[n].judged for n in ("pass@1", "pass@4", "pass@1 paired \u0394+"))


def test_intervals_keep_their_coverage_on_hard_members_with_one_sample_a_task():
    # Where a t-interval fails (every task failed in many repetitions: 87% coverage at 16 tasks).
    setting = _benchmark().calibrate(tasks=16, samples=1, profile="hard", reps=300, seed=0)
    for name in ("pass@1", "pass@1 paired \u0394+"):
        assert 0.90 <= setting.figures[name].coverage <= 0.99, (name, setting.figures[name].coverage)


def test_intervals_over_seeds_cover_the_procedures_value_where_one_seed_intervals_do_not():
    # The two-level world (a seed effect and a task effect), reduced: 3 seeds of 64 tasks, 4 samples each,
    # where task noise is small next to the seed effect, so an interval over one run's tasks misses often.
    setting = _benchmark().calibrate_seeds(seeds=3, tasks=64, samples=4, profile="mid", reps=300, seed=0)
    cover = {name: f.coverage for name, f in setting.figures.items()}
    for name in ("pass@1 across seeds", "pass@1 paired \u0394=0", "pass@1 paired \u0394+"):
        assert setting.figures[name].judged
        assert 0.90 <= cover[name] <= 0.99, (name, cover[name])
    assert not setting.figures["pass@1 one seed"].judged
    assert cover["pass@1 one seed"] < 0.85 and cover["pass@1 one seed \u0394+"] < 0.80, cover
    assert 0.03 < float(sum(setting.seed_spread) / len(setting.seed_spread)) < 0.1  # seeds do vary
