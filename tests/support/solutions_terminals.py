"""Reference and wrong solutions for every `local:terminals` task (they ship in
`ormix.workbench.envs.solutions`).

REFERENCE[task_id] earns reward 1.0; WRONG[task_id] is a plausible near miss that must earn 0.0.
Each list ends before `submit`, which the tests add.
"""

from ormix.workbench.envs.solutions import TERMINALS_REFERENCE as REFERENCE
from ormix.workbench.envs.solutions import TERMINALS_WRONG as WRONG

__all__ = ["REFERENCE", "WRONG"]
