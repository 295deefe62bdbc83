"""Run directories: what a run leaves behind, and how a later process continues it exactly.

A run directory holds ``manifest.json`` (what the run trains on), ``train_args.json``, ``log_history.jsonl``,
``rollouts/rank-<k>.jsonl``, ``alarms.jsonl``, ``progress.json`` (the last completed step), trainer
checkpoints ``checkpoint-<step>/`` (with ormix's own state beside the trainer's) and, at the end,
``report/`` and ``model/``. The manifest's ``start`` entry names the model GRPO started from (the warm start,
or the base model) by path and content hash (`weights_sha256`); a resumed run keeps it.

Continuing a run (`ormix train --resume`) means: the latest checkpoint (or a chosen one), the same mixture
(a changed one is refused before any server is contacted, naming every change, unless allowed), and every
append-only file cut back to the checkpoint's step, so the steps that follow are written once.

Example:
    >>> config_changes({"seed": 0, "weights": {"a": 1}}, {"seed": 1, "weights": {"a": 1}})
    ['seed: 0 → 1']
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from ormix._errors import UsageError

#: Files a run appends to, one JSON object a line, each carrying its training step as ``step``.
APPEND_ONLY = ("log_history.jsonl", "alarms.jsonl")
#: Config keys a resumed run may change (how to train, not what to train on).
RESUMABLE_KEYS = ("train", "telemetry", "name")
#: The telemetry's state in a checkpoint: the last file ormix writes there (after the trainer's state and
#: after an adaptive planner's), so a checkpoint of a run `ormix train` wrote is complete once it is there.
TELEMETRY_STATE = "ormix_telemetry.json"

_CHECKPOINT_RE = re.compile(r"checkpoint-(\d+)$")
#: The files of a model directory that hold its weights (what `weights_sha256` covers).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def weights_sha256(path: str | os.PathLike[str]) -> str | None:
    """sha256 over a model directory's weight files (each file's name, then its bytes, in name order);
    ``None`` when it holds none.

    Two directories with the same weights get the same hash wherever they are, so it says whether two runs
    started from the same model. A hash is kept in ormix's cache under the files' names, sizes and mtimes:
    hashing a multi-GB model once is a few seconds; asking again is free.

    Example:
        >>> import tempfile
        >>> d = Path(tempfile.mkdtemp())
        >>> weights_sha256(d) is None
        True
        >>> _ = (d / "model.safetensors").write_bytes(b"weights")
        >>> weights_sha256(d) == weights_sha256(d) and len(weights_sha256(d))
        64
    """
    from ormix._cache import default_cache_dir

    root = Path(path).resolve()
    files = (
        sorted(p for p in root.iterdir() if p.suffix in WEIGHT_SUFFIXES and p.is_file())
        if root.is_dir()
        else []
    )
    if not files:
        return None
    stamps = [(f.name, f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    key = hashlib.sha256(json.dumps([str(root), stamps]).encode()).hexdigest()[:32]
    cached = default_cache_dir() / "weights-sha256" / key
    try:
        known = cached.read_text().strip()
    except OSError:
        known = ""
    if len(known) == 64:
        return known
    digest = hashlib.sha256()
    for f, (name, _, _) in zip(files, stamps, strict=True):
        digest.update(name.encode() + b"\0")
        with open(f, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                digest.update(block)
    value = digest.hexdigest()
    with contextlib.suppress(OSError):  # a read-only cache: the hash is only computed again next time
        cached.parent.mkdir(parents=True, exist_ok=True)
        _replace_text(cached, value + "\n")
    return value


def checkpoint_path(run_dir: str | os.PathLike[str], step: int) -> Path:
    """Where the trainer saves (and ormix's callbacks keep their state for) the checkpoint of ``step``.

    Example:
        >>> checkpoint_path("runs/x", 40).as_posix()
        'runs/x/checkpoint-40'
    """
    return Path(run_dir) / f"checkpoint-{step}"


def checkpoint_step(path: str | os.PathLike[str]) -> int | None:
    """The step of a ``checkpoint-<step>`` directory name (``None``: no checkpoint's name).

    Example:
        >>> checkpoint_step("runs/x/checkpoint-40"), checkpoint_step("runs/x/model")
        (40, None)
    """
    match = _CHECKPOINT_RE.search(Path(path).name)
    return int(match.group(1)) if match else None


def config_changes(old: Any, new: Any, path: str = "") -> list[str]:
    """Every difference between two configs (`MixtureConfig.manifest_dict`), as ``key.path: old → new``.

    Example:
        >>> config_changes({"members": {"a": {"weight": 1}}}, {"members": {"a": {"weight": 2}, "b": {}}})
        ['members.a.weight: 1 → 2', 'members.b: added']
    """
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        out: list[str] = []
        for key in list(old) + [k for k in new if k not in old]:
            where = f"{path}.{key}" if path else str(key)
            if key not in new:
                out.append(f"{where}: removed")
            elif key not in old:
                out.append(f"{where}: added")
            else:
                out += config_changes(old[key], new[key], where)
        return out
    if old != new:
        return [f"{path}: {json.dumps(old, default=str)} → {json.dumps(new, default=str)}"]
    return []


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The objects of a file a run appends to (one JSON object a line; none when there is no file).

    A torn line (the process died mid-write) is skipped with a warning.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "x.jsonl"
        >>> _ = p.write_text('{"step": 1}\\n{"step": 2}\\n{"st')
        >>> read_jsonl(p)
        [{'step': 1}, {'step': 2}]
    """
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            if line.strip():
                logging.getLogger("ormix").warning("ormix: skipping a torn line in %s", path)
            continue
        if isinstance(value, dict):
            out.append(value)
    return out


def append_jsonl(path: Path, records: Sequence[dict[str, Any]], seq: int, *, sync: bool = False) -> int:
    """Append ``records`` to a JSONL file, numbering them ``seq``, ``seq + 1``, ... (their ``seq`` field, set
    on each record); returns the next number. One write of whole lines; ``sync`` waits for the disk. NaN is
    refused (`ValueError`) and other objects are written as text.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "x.jsonl"
        >>> append_jsonl(p, [{"a": 1}, {"a": 2}], 5), read_jsonl(p)
        (7, [{'a': 1, 'seq': 5}, {'a': 2, 'seq': 6}])
    """
    lines = []
    for record in records:
        record["seq"] = seq
        seq += 1
        lines.append(json.dumps(record, default=str, allow_nan=False) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(lines))
        if sync:
            fh.flush()
            os.fsync(fh.fileno())
    return seq


def write_jsonl(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Replace a JSONL file by ``records``, atomically (a reader sees the old file or the new one).

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "x.jsonl"
        >>> write_jsonl(p, [{"a": 1}]); p.read_text()
        '{"a": 1}\\n'
    """
    _replace_text(path, "".join(json.dumps(r, default=str) + "\n" for r in records))


def _replace_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def truncate_jsonl(path: Path, after_step: int) -> int:
    """Drop the lines of a JSONL file whose ``step`` is after ``after_step`` (and a torn last line).

    Returns how many lines were dropped. The file is rewritten atomically.

    Example:
        >>> import tempfile
        >>> p = Path(tempfile.mkdtemp()) / "x.jsonl"
        >>> _ = p.write_text('{"step": 1}\\n{"step": 2}\\n{"step": 3')
        >>> truncate_jsonl(p, 1), p.read_text()
        (2, '{"step": 1}\\n')
    """
    if not path.exists():
        return 0
    kept: list[str] = []
    dropped = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            step = json.loads(line).get("step")
        except (json.JSONDecodeError, AttributeError):
            dropped += 1
            continue
        if isinstance(step, int) and step > after_step:
            dropped += 1
        else:
            kept.append(line)
    _replace_text(path, "".join(f"{line}\n" for line in kept))
    return dropped


def installed_versions(dists: Iterable[str]) -> dict[str, str]:
    """The installed version of each of ``dists`` (those not installed left out), for a manifest.

    Example:
        >>> installed_versions(["ormix", "no-such-distribution"]).keys()
        dict_keys(['ormix'])
    """
    from importlib import metadata

    out = {}
    for dist in dists:
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[dist] = metadata.version(dist)
    return out


class RunDirectory:
    """One run's directory (see the module docstring)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDirectory({str(self.path)!r})"

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    def holds_a_run(self) -> bool:
        """Whether an earlier run wrote here (a manifest, records, logs or checkpoints)."""
        if not self.path.is_dir():
            return False
        return (
            self.manifest_path.exists()
            or any(self.path.glob("checkpoint-*"))
            or any((self.path / "rollouts").glob("rank-*.jsonl"))
            or (self.path / "log_history.jsonl").exists()
        )

    def trained_here(self) -> bool:
        """Whether a training run wrote here: its manifest and train args (an eval directory, which also
        has a ``manifest.json``, has no ``train_args.json``)."""
        return self.manifest_path.is_file() and (self.path / "train_args.json").is_file()

    def checkpoints(self) -> list[tuple[int, Path]]:
        """Complete checkpoints, by step: a trainer state inside and, in a run `ormix train` wrote, ormix's
        own (`TELEMETRY_STATE`, written last: a checkpoint killed before it is not one to resume from)."""
        needed = ["trainer_state.json"] + ([TELEMETRY_STATE] if self.trained_here() else [])
        found = []
        for child in self.path.glob("checkpoint-*"):
            step = checkpoint_step(child)
            if step is not None and all((child / name).exists() for name in needed):
                found.append((step, child))
        return sorted(found)

    def latest_checkpoint(self) -> Path | None:
        """The newest complete checkpoint, or ``None``."""
        found = self.checkpoints()
        return found[-1][1] if found else None

    def resolve_checkpoint(self, which: str | os.PathLike[str] | None) -> Path:
        """The checkpoint to resume from: ``"latest"``/``None`` (the newest) or a path; `UsageError` if
        none."""
        if which in (None, "latest"):
            latest = self.latest_checkpoint()
            if latest is None:
                raise UsageError(
                    f"{self.path} has no checkpoint to resume from (checkpoint-<step>/ with a "
                    "trainer_state.json); set save_steps in the mixture's train: section (or --set "
                    "save_steps=N) so runs leave them"
                )
            return latest
        path = Path(which)
        if not (path / "trainer_state.json").exists():
            raise UsageError(
                f"{path} is not a checkpoint (no trainer_state.json in it); pass a checkpoint-<step>/ "
                f"directory of the run, or --resume alone for the latest"
            )
        return path

    @staticmethod
    def step_of(checkpoint: Path) -> int:
        """The training step a checkpoint was saved at."""
        state = json.loads((checkpoint / "trainer_state.json").read_text())
        return int(state.get("global_step", 0))

    def start(self) -> dict[str, Any] | None:
        """The manifest's ``start`` (the model GRPO started from: ``path``, ``sha256``, how it was made), or
        ``None`` when the run recorded none."""
        start = (self.read_manifest() or {}).get("start")
        return start if isinstance(start, dict) else None

    def read_manifest(self) -> dict[str, Any] | None:
        """The manifest an earlier run wrote, if any."""
        if not self.manifest_path.exists():
            return None
        return json.loads(self.manifest_path.read_text())

    def changes_since(self, new_config: Mapping[str, Any]) -> list[str]:
        """What differs between the stored run's config and ``new_config`` (``MixtureConfig.manifest_dict``),
        ignoring how to train (`RESUMABLE_KEYS`) and the eval set of a member that only evaluates (in both:
        it changes no training step, only what the run's last evaluation measures).

        Example:
            >>> import json, tempfile
            >>> run = RunDirectory(tempfile.mkdtemp())
            >>> def config(eval_set):
            ...     return {"members": {"a": {"role": "train"}, "b": {"role": "eval", "eval": eval_set}}}
            >>> _ = run.manifest_path.write_text(json.dumps({"config": config(None)}))
            >>> run.changes_since(config({"split": "test"})), run.changes_since({**config(None), "seed": 1})
            ([], ['seed: added'])
        """
        stored = (self.read_manifest() or {}).get("config")
        if stored is None:
            return ["the run directory has no manifest with a config (it was not written by ormix train)"]
        new = dict(new_config)
        evaluating = {
            name
            for name, member in (stored.get("members") or {}).items()
            if isinstance(member, Mapping)
            and member.get("role") == "eval"
            and ((new.get("members") or {}).get(name) or {}).get("role") == "eval"
        }

        def strip(config: Mapping[str, Any]) -> dict[str, Any]:
            kept = {k: v for k, v in config.items() if k not in RESUMABLE_KEYS}
            if isinstance(kept.get("members"), Mapping):
                kept["members"] = {
                    n: {k: v for k, v in m.items() if not (n in evaluating and k == "eval")}
                    if isinstance(m, Mapping)
                    else m
                    for n, m in kept["members"].items()
                }
            return kept

        return config_changes(strip(stored), strip(new))

    def prepare(
        self,
        config: Mapping[str, Any],
        *,
        resume: str | os.PathLike[str] | None,
        overwrite: bool,
        allow_changed: bool,
    ) -> tuple[Path | None, list[str]]:
        """Check the directory before a run starts: ``(checkpoint to resume, what changed in the config)``.

        Without ``resume`` it must hold no run (or ``overwrite`` clears it); with it, it must hold one whose
        config (``MixtureConfig.manifest_dict``) is unchanged unless ``allow_changed``. Every refusal is a
        `UsageError` naming the flag that changes it.
        """
        if resume is None:
            if self.holds_a_run():
                if not overwrite:
                    raise UsageError(
                        f"{self.path} already holds a run; continue it with --resume, start it over with "
                        "--overwrite, or pick another --output-dir"
                    )
                self.clear()
            return None, []
        if not self.holds_a_run():
            raise UsageError(
                f"{self.path} holds no run to resume (no manifest.json); drop --resume to start one there"
            )
        checkpoint = self.resolve_checkpoint(resume)
        changes = self.changes_since(config)
        if changes and not allow_changed:
            raise UsageError(
                f"the mixture changed since {self.path} was trained, so resuming would not continue the same "
                "run:\n  "
                + "\n  ".join(changes)
                + "\nrestore the mixture, or pass --allow-changed-mixture to "
                "resume anyway (recorded in the manifest)"
            )
        return checkpoint, changes

    def resumed_manifest(
        self, manifest: dict[str, Any], checkpoint: Path, changes: list[str], allowed: bool
    ) -> dict[str, Any]:
        """The manifest of a resumed run: the new one (`MixtureSpec.manifest`), refused when the servers now
        answer differently (unless ``allowed``), with every resume recorded under ``resumes``."""
        stored = self.read_manifest() or {}
        if not allowed and stored.get("resolved_hash") not in (None, manifest["resolved_hash"]):
            raise UsageError(
                f"the servers answered differently than when {self.path} was trained (task lists, tools or "
                "the plan changed, or the run was made by a version of ormix that plans differently), so "
                "resuming would not continue the same run; pass --allow-changed-mixture to resume anyway"
            )
        resume = {
            "from": str(checkpoint),
            "step": self.step_of(checkpoint),
            "time": datetime.now().isoformat(timespec="seconds"),
            "changed": changes,
            "allowed_changes": bool(allowed and changes),
        }
        kept = {"start": stored["start"]} if "start" in stored else {}  # a resumed run has one start
        return {**manifest, **kept, "resumes": [*stored.get("resumes", []), resume]}

    def cut_back(self, step: int) -> dict[str, int]:
        """Cut the run's own append-only files (logs, alarms) back to ``step`` and mark it the last completed
        one; returns the lines dropped per file. Each rank's rollout records are cut by its own telemetry
        (`ormix.telemetry._records.TelemetryRun`) when training resumes, and rank 0's also cuts the files of
        ranks the resumed run does not have (it resumed on fewer processes)."""
        dropped = {name: truncate_jsonl(self.path / name, step) for name in APPEND_ONLY}
        self.write_progress(step)
        return dropped

    def clear(self) -> None:
        """Remove an earlier run's files (`--overwrite`): manifest, logs, records, checkpoints."""
        for name in ("manifest.json", "train_args.json", "progress.json", *APPEND_ONLY):
            (self.path / name).unlink(missing_ok=True)
        for path in (self.path / "rollouts", self.path / "completions"):
            shutil.rmtree(path, ignore_errors=True)
        for child in self.path.glob("checkpoint-*"):
            shutil.rmtree(child, ignore_errors=True)

    def write_progress(self, step: int) -> None:
        """Record that every step up to ``step`` completed (reports ignore rollouts of later steps)."""
        self.path.mkdir(parents=True, exist_ok=True)
        _replace_text(self.path / "progress.json", json.dumps({"completed_step": int(step)}) + "\n")

    def completed_step(self) -> int | None:
        """The last completed step recorded by `write_progress` (``None`` when unknown)."""
        try:
            return int(json.loads((self.path / "progress.json").read_text())["completed_step"])
        except (OSError, ValueError, KeyError, TypeError):
            return None
