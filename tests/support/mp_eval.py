"""Evals on 2 CPU ranks, for tests/integrations/test_multiprocess_eval.py (also run as one plain process).

Usage: torchrun --nproc_per_node 2 tests/support/mp_eval.py MIXTURE OUT_DIR MODE [MAX_CHUNKS]

MODE ``eval``: `run_eval`, the path of `ormix eval`, playing each task's reference solution (the oracle
run: outcomes that do not depend on sampling, so one process and two must agree task by task), 2 samples
a task, 3 tasks a chunk (3 tasks over 2 processes: one process's batch is padded). MODE ``train``:
`evaluate_run` on a built trainer, the path of the evals before and after training of `ormix train`.
Each rank writes ``OUT_DIR.rank-N.json``: what it returned there.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path


def _environment() -> None:
    # Set when run, never on import: pytest imports this file for its doctests, and a variable set here would
    # leak into every later test of that worker (ORMIX_LOCAL_SERVE=thread moves servers into the CLI).
    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("OPENREWARD_LOG_LEVEL", "WARNING")
    os.environ.setdefault("ORMIX_LOCAL_SERVE", "thread")


OPTIONS = dict(
    policy="reference",
    samples=2,
    k=(1, 2),
    tasks_per_chunk=3,
    # gloo on CPU across processes (a process group TrainingArguments starts only under torchrun)
    settings={
        "use_cpu": True,
        **({"ddp_backend": "gloo"} if int(os.environ.get("WORLD_SIZE", "1")) > 1 else {}),
    },
)


def run_eval_mode(mixture: str, out: Path, max_chunks: int | None) -> dict:
    from ormix.app._eval import run_eval

    result = run_eval(mixture, out_dir=out, max_chunks=max_chunks, **OPTIONS)
    return {
        "ran": result.ran_tasks,
        "resumed": result.resumed_tasks,
        "complete": result.complete,
        "summary": result.summary,
    }


def train_mode(mixture: str, out: Path) -> dict:
    """What `ormix train` does for its eval before training, on a trainer playing the reference solutions."""
    from ormix.app._eval import EvalOptions, _build_trainer, _eval_args
    from ormix.app._oracle import attach_reference_policy, reference_calls
    from ormix.app._train.evals import eval_plan, evaluate_run
    from ormix.config import EvaluationConfig
    from ormix.mixture import load_mixture

    mix = load_mixture(mixture)
    tasks, _ = eval_plan(mix)
    calls, _ = reference_calls(mix, tasks)
    opts = EvalOptions(**OPTIONS).for_mixture(mix.config)
    args, _ = _eval_args(mix, opts, out.with_name(out.name + "-scratch"), None, max(map(len, calls.values())))
    trainer = _build_trainer(mix, opts, args, None, "tiny", tasks)
    attach_reference_policy(trainer, calls)
    evaluation = EvaluationConfig(k=[1, 2], samples=2)
    evaluate_run(trainer, mix, evaluation, tasks, out, None, model="tiny")
    mix.close()
    return {"summary": json.loads((out / "summary.json").read_text())} if args.process_index == 0 else {}


def main(mixture: str, out: str, mode: str, max_chunks: str | None = None) -> None:
    target = Path(out)
    if mode == "eval":
        result = run_eval_mode(mixture, target, int(max_chunks) if max_chunks else None)
    else:
        result = train_mode(mixture, target)
    rank = os.environ.get("RANK", "0")
    Path(f"{out}.rank-{rank}.json").write_text(json.dumps(result, default=str))


if __name__ == "__main__":
    _environment()
    main(*sys.argv[1:])
