"""The choices a command's flag and the option it sets share, each written once.

Here, and not beside the code that uses them, so that the command line can declare its flags with them
without importing that code (`ormix --help` stays fast): typer checks a flag's value against its `Literal`
(a wrong one exits 2, naming the allowed values), and the option models and functions are typed with it.
"""

from typing import Literal

#: How an ablation arm's prompts per step follow the members it drops (`ormix.mixture._ablation`).
Budget = Literal["same-total", "same-per-member"]
#: What a run does on SIGTERM: save a checkpoint when the current step ends, or stop at once.
TerminationPolicy = Literal["checkpoint", "abandon"]
#: Who plays an eval's tasks: the model, or each task's reference solution (an oracle check).
EvalPolicy = Literal["model", "reference"]
#: Which rollouts of a run directory `ormix show` reads: its training's, or its evals' during training.
ShowMode = Literal["train", "eval"]
