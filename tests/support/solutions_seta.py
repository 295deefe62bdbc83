"""Reference and wrong solutions for every `local:seta` task (they ship in `ormix.workbench.envs.solutions`).

REFERENCE[task_id] earns reward 1.0. WRONG[task_id] is (expected reward, calls): a near miss whose reward
is below 1.0. Each list ends before `submit_solution`, which the tests add.
"""

from ormix.workbench.envs.solutions import SETA_REFERENCE as REFERENCE
from ormix.workbench.envs.solutions import SETA_WRONG as WRONG

__all__ = ["REFERENCE", "WRONG"]
