"""An eval directory: what `ormix eval` leaves, and how a later run resumes it.

It holds ``manifest.json`` (`ormix.app._eval_manifest`: what the eval is), ``rollouts.jsonl`` (one rollout
record a line, in the training format with ``mode: "eval"``, appended chunk by chunk), ``summary.json``
(`ormix.evaluation._summary.summarize`), ``report.md`` and ``plots/summary.png``. A directory holding
another eval is refused (``--overwrite`` removes exactly the eval's files); the same eval resumes: its
complete tasks are kept, the records of an incomplete task are dropped, and the task runs again.

Example:
    >>> import tempfile
    >>> out = EvalDirectory(Path(tempfile.mkdtemp()) / "eval")
    >>> out.prepare({"samples": 2}, overwrite=False)       # nothing there yet
    >>> out.append([{"member": "a", "task_index": 0}] * 2, seq=0)
    2
    >>> out.resume({("a", None, 0), ("a", None, 1)}, samples=2)
    ({('a', None, 0)}, 2)
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from ormix._runs import append_jsonl, read_jsonl, write_jsonl
from ormix.app._eval_manifest import identity_changes
from ormix.evaluation._errors import EvalError
from ormix.evaluation._tasks import TaskKey, task_key

#: What an eval directory holds (``--overwrite`` removes exactly these).
EVAL_FILES = ("manifest.json", "rollouts.jsonl", "summary.json", "report.md", "plots")


class EvalDirectory:
    """One eval's directory (see the module docstring).

    Example:
        >>> import tempfile
        >>> out = EvalDirectory(Path(tempfile.mkdtemp()))
        >>> out.write_manifest({"samples": 4})
        >>> out.prepare({"samples": 8}, overwrite=False)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ormix.evaluation._errors.EvalError: ... holds another eval (samples: 4 → 8): pass ...
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"EvalDirectory({str(self.path)!r})"

    @property
    def manifest_path(self) -> Path:
        return self.path / "manifest.json"

    @property
    def records_path(self) -> Path:
        return self.path / "rollouts.jsonl"

    def prepare(self, manifest: Mapping[str, Any], overwrite: bool) -> None:
        """Refuse a directory holding another eval (`EvalError`), unless ``overwrite``: then its
        eval files go; the same eval is kept (it resumes)."""
        if overwrite:
            for name in EVAL_FILES:
                target = self.path / name
                if target.is_dir():
                    shutil.rmtree(target)
                elif target.exists():
                    target.unlink()
            return
        if not self.manifest_path.is_file():
            if self.records_path.is_file():
                raise EvalError(
                    f"{self.path} holds rollouts.jsonl but no manifest.json, so what it measured is unknown: "
                    "pass --overwrite to start over there, or --out another directory"
                )
            return
        try:
            old = json.loads(self.manifest_path.read_text(encoding="utf-8"))
        except ValueError as e:
            raise EvalError(
                f"{self.manifest_path} is not valid JSON ({e}): pass --overwrite to start over"
            ) from None
        changes = identity_changes(old if isinstance(old, dict) else {}, manifest)
        if changes:
            raise EvalError(
                f"{self.path} holds another eval ({'; '.join(changes)}): pass --overwrite to start over "
                "there, or --out another directory"
            )

    def write_manifest(self, manifest: Mapping[str, Any]) -> None:
        """Write ``manifest.json`` (creating the directory)."""
        self.path.mkdir(parents=True, exist_ok=True)
        self.manifest_path.write_text(json.dumps(manifest, indent=2, default=str) + "\n", encoding="utf-8")

    def records(self) -> list[dict[str, Any]]:
        """The rollout records so far (a torn last line skipped)."""
        return read_jsonl(self.records_path)

    def summary_records(self) -> list[dict[str, Any]]:
        """The records' fields a summary reads (`ormix.telemetry._records.READ_FIELDS`), read by columns: what
        `write_outputs` needs, without the prompts and completions an eval's records carry.

        Example:
            >>> import tempfile
            >>> out = EvalDirectory(Path(tempfile.mkdtemp()))
            >>> _ = out.append([{"member": "a", "task_index": 0, "completion": "long text"}], seq=0)
            >>> [(r["member"], r["task_index"], "completion" in r) for r in out.summary_records()]
            [('a', 0, False)]
        """
        from ormix.telemetry._records import read_record_table

        return read_record_table([self.records_path]).to_pylist() if self.records_path.is_file() else []

    def resume(self, planned: Collection[TaskKey], samples: int) -> tuple[set[TaskKey], int]:
        """The ``planned`` tasks already complete here (``samples`` records each); the records of incomplete
        or unplanned tasks are dropped from the file (they run again). Returns (complete, records kept)."""
        records = self.records()
        counts = Counter(task_key(record) for record in records)
        complete = {key for key, n in counts.items() if key is not None and n >= samples and key in planned}
        kept = [r for r in records if task_key(r) in complete]
        if len(kept) != len(records):
            write_jsonl(self.records_path, kept)
        return complete, len(kept)

    def append(self, records: Sequence[dict[str, Any]], seq: int) -> int:
        """Append a chunk's records (numbered from ``seq``) and wait for the disk; returns the next number."""
        return append_jsonl(self.records_path, records, seq, sync=True)

    def write_outputs(
        self,
        records: list[dict[str, Any]],
        manifest: Mapping[str, Any],
        say: Callable[[str], None],
        *,
        complete: bool = True,
    ) -> dict[str, Any]:
        """``summary.json``, ``report.md`` and ``plots/summary.png`` from the records; returns the summary
        (``complete``: every planned task has its samples; an incomplete eval says so in its summary)."""
        from ormix.evaluation._summary import summarize, summary_markdown

        summary = summarize(
            records,
            manifest.get("k") or [1],
            success_threshold=float(manifest.get("success_threshold", 1.0)),
            seed=int(manifest.get("seed", 0)),
        )
        summary.update({key: manifest.get(key) for key in ("policy", "model", "samples")}, complete=complete)
        members = manifest.get("members", {})
        title = f"Eval of {manifest.get('mixture')}: {manifest.get('model')}"
        if manifest.get("policy") == "reference":
            summary["no_reference"] = {
                m: entry["no_reference"] for m, entry in members.items() if entry.get("no_reference")
            }
            title = f"Reference solutions of {manifest.get('mixture')} (oracle run)"
        (self.path / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
        lines = [summary_markdown(summary, title), "", "## Tasks", ""]
        for member, entry in members.items():
            lines.append(
                f"- {member} ({entry.get('target')}): {len(entry.get('tasks', []))} tasks of split "
                f"{entry.get('split')!r} ({entry.get('source')}), {manifest.get('samples')} samples each"
            )
            if entry.get("no_reference"):
                lines.append(f"  - no reference solution for {len(entry['no_reference'])} of them (not run)")
        (self.path / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
        try:
            from ormix.app._plots import summary_figure

            if summary["members"]:
                figure = summary_figure(summary, title)
                (self.path / "plots").mkdir(exist_ok=True)
                figure.savefig(self.path / "plots" / "summary.png", dpi=100, bbox_inches="tight")
                import matplotlib.pyplot as plt

                plt.close(figure)
        except ImportError as e:  # pragma: no cover - matplotlib is a dependency
            say(f"  no plot: {e}")
        return summary
