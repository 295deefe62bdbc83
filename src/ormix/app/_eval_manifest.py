"""An eval's manifest (``manifest.json``): what the eval measured, and what makes two evals the same eval.

It records the mixture and its config hash, the model, the policy, samples per task, the seed, the
generation settings, and per member its target, split, tasks and where they came from (plus ``k`` and the
success threshold, which only change what is reported, and the installed versions). An eval directory
resumes only the same eval: `identity_changes` names what differs.

Example:
    >>> identity_changes({"samples": 4, "seed": 0}, {"samples": 8, "seed": 0})
    ['samples: 4 → 8']
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ormix._runs import config_changes, installed_versions

if TYPE_CHECKING:  # pragma: no cover
    from ormix.evaluation._tasks import EvalTasks
    from ormix.mixture import MixtureSpec

#: Version of the eval manifest's layout.
MANIFEST_VERSION = 1
#: Manifest keys that say what an eval measured: a directory whose manifest differs in one of them holds
#: another eval (k and the success threshold only change what is reported, so they may change on resume).
IDENTITY_KEYS = ("mixture", "config_hash", "model", "policy", "samples", "seed", "generation", "members")
#: Generation settings an eval's manifest records (GRPOConfig fields).
GENERATION_SETTINGS = (
    "temperature",
    "top_p",
    "top_k",
    "min_p",
    "repetition_penalty",
    "max_completion_length",
    "max_tool_calling_iterations",
    "use_vllm",
    "vllm_mode",
    "generation_kwargs",
    "chat_template_kwargs",
)
#: The distributions whose versions an eval's manifest records.
VERSIONED = ("ormix", "trl", "transformers", "torch", "vllm")


def generation_settings(args: Any) -> dict[str, Any]:
    """The `GENERATION_SETTINGS` of a `GRPOConfig` (``None`` for those it lacks).

    Example:
        >>> from types import SimpleNamespace
        >>> generation_settings(SimpleNamespace(temperature=0.7))["temperature"]
        0.7
    """
    return {k: getattr(args, k, None) for k in GENERATION_SETTINGS}


def eval_manifest(
    args: Any, mix: MixtureSpec, tasks: Mapping[str, EvalTasks], samples: int, **fields: Any
) -> dict[str, Any]:
    """What an eval is: mixture and config hash, model, policy, samples, seed, the generation settings of
    ``args`` (a `GRPOConfig`), per member its target, split, tasks and their source; plus ``fields``
    (``model``, ``policy``, ``k``, ``success_threshold``; ``no_reference``: member → task indices).

    Example:
        >>> from types import SimpleNamespace
        >>> from ormix.evaluation._tasks import EvalTasks
        >>> from ormix.mixture import MixtureSpec
        >>> from ormix._spec import OpenRewardSpec
        >>> mix = MixtureSpec({"echo": OpenRewardSpec("local:echo")})
        >>> tasks = {"echo": EvalTasks("echo", "local:echo", "test", (0, 1), "test split")}
        >>> manifest = eval_manifest(SimpleNamespace(seed=3), mix, tasks, 4, no_reference={"echo": [1]})
        >>> manifest["samples"], manifest["seed"], manifest["k"], manifest["members"]["echo"]["no_reference"]
        (4, 3, [1, 4], [1])
    """
    members = {m: t.as_dict() for m, t in tasks.items()}
    for member, indices in (fields.pop("no_reference", None) or {}).items():
        members[member]["no_reference"] = list(indices)
    manifest: dict[str, Any] = {
        "version": MANIFEST_VERSION,
        "mixture": mix.name,
        "config_hash": mix.config.config_hash(),
        "model": None,
        "policy": "model",
        "samples": samples,
        "seed": int(getattr(args, "seed", 0)),
        "k": sorted({1, samples}),
        "success_threshold": 1.0,
        "generation": generation_settings(args),
        "members": members,
        "secret_env": mix.config.secret_sources(),
        "versions": installed_versions(VERSIONED),
    }
    manifest.update(fields)
    return manifest


def trainer_manifest(
    trainer: Any, mix: MixtureSpec, tasks: Mapping[str, EvalTasks], samples: int, **fields: Any
) -> dict[str, Any]:
    """The manifest of an eval by this trainer (its model, generation settings, seed) over these tasks.

    ``fields`` (``model``, ``policy``, ``k``, ``no_reference`` ...) override what is read from the trainer.

    Example:
        >>> from types import SimpleNamespace
        >>> from ormix.mixture import MixtureSpec
        >>> from ormix._spec import OpenRewardSpec
        >>> trainer = SimpleNamespace(args=SimpleNamespace(seed=0),
        ...                           model=SimpleNamespace(name_or_path="runs/x/model"))
        >>> trainer_manifest(trainer, MixtureSpec({"echo": OpenRewardSpec("local:echo")}), {}, 2)["model"]
        'runs/x/model'
    """
    model = getattr(getattr(trainer, "model", None), "name_or_path", None)
    fields.setdefault("model", str(model) if model is not None else None)
    return eval_manifest(trainer.args, mix, tasks, samples, **fields)


def identity_changes(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What makes the eval of manifest ``new`` another eval than ``old``'s (`IDENTITY_KEYS`), in words
    (`ormix._runs.config_changes`); empty: the same eval.

    Example:
        >>> old = {"model": "a", "generation": {"temperature": 1.0}, "members": {"echo": {"tasks": [0]}}}
        >>> identity_changes(old, {**old, "generation": {"temperature": 0.5}, "members": {}})
        ['generation.temperature: 1.0 → 0.5', 'members or their tasks']
    """
    changes: list[str] = []
    for key in IDENTITY_KEYS:
        if key == "members":
            changes += ["members or their tasks"] if old.get(key) != new.get(key) else []
        else:
            changes += config_changes(old.get(key), new.get(key), key)
    return changes
