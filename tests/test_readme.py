"""The README's quickstart is exactly what CI runs: two commands, one for the main job, one for the tests."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def quickstart_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.split("#", 1)[0].strip()]


def test_quickstart_is_two_commands_and_ci_runs_both():
    commands = quickstart_commands()
    assert commands == ["make demo", "make test"]
    ci = (ROOT / ".ci" / "run").read_text()
    ci_lines = [line.strip() for line in ci.splitlines() if line.strip() and not line.strip().startswith("#")]
    assert "make test" in ci_lines
    assert any(line.startswith("make demo") for line in ci_lines)


def test_make_targets_run_the_main_job_and_the_suite():
    makefile = (ROOT / "Makefile").read_text()
    demo = makefile.split("\ndemo:", 1)[1].split("\n\n", 1)[0]
    test = makefile.split("\ntest:", 1)[1].split("\n\n", 1)[0]
    assert "ormix train mixtures/local-skills.yaml" in demo  # the held-out demo (docs/demo.md)
    assert "pytest" in test and "-n auto" in test  # the suite runs on every core (pytest-xdist)
    setup = makefile.split("$(VENV)/.ormix-installed: pyproject.toml", 1)[1].split("\n\n", 1)[0]
    # torch's CPU build before the project, so resolving TRL never pulls a CUDA build
    assert setup.index("torch==2.13.0") < setup.index("-e '.[trl,plot,dev]'")
    assert "bubblewrap" in setup


def test_your_own_environment_section_trains_as_written(tmp_path):
    """The guide "Your own environment" (docs/guides/own-environment.md, linked from the README): its files
    written as given, its commands run as given (the `ormix` console script is this checkout's CLI); the run
    scores its member (coverage > 0)."""
    import json
    import os
    import subprocess
    import sys

    section = (ROOT / "docs" / "guides" / "own-environment.md").read_text()
    assert section.startswith("# Your own environment\n")  # the page is that one section
    for lang in ("python", "yaml"):
        block = re.search(rf"```{lang}\n# (\S+)\n(.*?)```", section, re.S)
        (tmp_path / block.group(1)).write_text(block.group(2))
    commands = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    for line in commands.splitlines():
        command = line.split("#", 1)[0].split()
        assert command[0] == "ormix"
        done = subprocess.run(
            [sys.executable, "-m", "ormix.app", *command[1:]],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    summary = json.loads((tmp_path / "runs" / "reverse" / "report" / "summary.json").read_text())
    assert "never scored" not in done.stdout
    assert "reverse" in json.dumps(summary)
    history = [
        json.loads(x) for x in (tmp_path / "runs" / "reverse" / "log_history.jsonl").read_text().splitlines()
    ]
    coverage = [h["ormix/reverse/coverage"] for h in history if "ormix/reverse/coverage" in h]
    assert len(coverage) == 3 and min(coverage) > 0
