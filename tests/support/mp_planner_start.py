"""Script for tests/integrations/test_multiprocess_adaptive.py, launched with `torchrun --nproc_per_node 2`
(gloo, CPU): two processes whose platform priors differ start training (`AdaptiveCallback.on_train_begin`).

Usage: torchrun --nproc_per_node 2 tests/support/mp_planner_start.py OUTPUT_DIR

Process 0's platform answer says task 0 of member `a` was always solved; process 1's (asked later, after more
rollouts were logged) says task 1. Each rank writes the rows its planner then decides for steps 1 and 2 to
OUTPUT_DIR/rank-<k>.json. No model, no trainer: the callback is TRL's hook, called as TRL calls it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace


def main(out: str) -> None:
    import torch.distributed as dist

    from ormix.config import MixtureConfig
    from ormix.mixture._adaptive_run import AdaptiveRun
    from ormix.mixture._planner import Evidence, Planner
    from ormix.trl._callbacks import AdaptiveCallback

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    cfg = MixtureConfig(
        members={
            "a": {"target": "Owner/A", "filter": {"prior": "platform", "cooldown_steps": 4}},
            "b": {"target": "local:echo"},
        },
        strategy="adaptive",
        prompts_per_step=4,
    )
    tasks = {"a": [0, 1, 2, 3], "b": [0, 1, 2, 3]}
    planner = Planner(cfg, tasks, difficulty={"a": {rank: Evidence(1.0, 1.0, 9)}})
    run = AdaptiveRun(planner, {m: {t: {"task_index": t} for t in ts} for m, ts in tasks.items()})
    args = SimpleNamespace(process_index=rank, num_generations=2, dataloader_num_workers=0, output_dir=out)
    AdaptiveCallback(run).on_train_begin(args, SimpleNamespace(global_step=0), SimpleNamespace())
    decided = {"rows": run.planner.rows(1) + run.planner.rows(2)}
    Path(out, f"rank-{rank}.json").write_text(json.dumps(decided))
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
