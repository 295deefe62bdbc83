"""Targets are resolved with the rest of a mixture file: typos, missing modules and non-environments are
reported at validation with their line and a "did you mean", and a module next to the file is found."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ormix.config import MixtureConfigError, load_mixture_config

ENV_MODULE = '''
from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel


class Params(BaseModel):
    word: str


class WordEnv(Environment):
    def __init__(self, task_spec, secrets=None):
        super().__init__(task_spec, secrets or {})

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split):
        return [{"word": "hi"}]

    def get_prompt(self):
        return [TextBlock(text="say hi")]

    @tool
    def say(self, params: Params) -> ToolOutput:
        """Say a word."""
        reward = float(params.word == "hi")
        return ToolOutput(blocks=[TextBlock(text=params.word)], reward=reward, finished=True)


def not_an_env():
    pass
'''


@pytest.fixture
def project(tmp_path: Path) -> Path:
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "wordenv_mod.py").write_text(ENV_MODULE)
    return folder


def test_every_bad_target_is_named_with_its_line(project):
    file = project / "mix.yaml"
    file.write_text(
        textwrap.dedent(
            """\
            members:
              a: {target: "local:terminal"}
              b: {target: "wordenv_mod:WordEnvv"}
              c: {target: "wordenv_mod:not_an_env"}
              d: {target: "nowhere_mod:Env"}
              e: {target: "http//localhost:8080"}
            """
        )
    )
    with pytest.raises(MixtureConfigError) as info:
        load_mixture_config(file)
    text = str(info.value)
    assert "5 problems" in text
    assert (
        ":2: members.a.target: 'local:terminal' is not a local environment; did you mean 'local:terminals'?"
        in text
    )
    assert (
        ":3: members.b.target: module 'wordenv_mod' has no 'WordEnvv'" in text
        and "did you mean wordenv_mod:WordEnv?" in text
    )
    assert ":4: members.c.target: 'wordenv_mod:not_an_env' is a function, not an openreward" in text
    assert ":5: members.d.target: no module 'nowhere_mod'" in text and "next to the mixture file" in text
    assert ":6: members.e.target:" in text and "write http://localhost:8080" in text
    assert "http://http//" not in text


def test_checking_shipped_local_targets_imports_no_openreward():
    # The trainer serves them from child processes; importing openreward there too costs seconds per run.
    demo = Path(__file__).resolve().parents[2] / "mixtures" / "local-demo.yaml"
    code = (
        "import sys; from ormix.config import load_mixture_config; "
        f"cfg = load_mixture_config({str(demo)!r}); "
        "print(sorted(m.target for m in cfg.members.values()), 'openreward' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "['local:echo', 'local:seta', 'local:terminals'] False"


def test_a_module_next_to_the_mixture_file_is_found_by_the_server_child_too(project, tmp_path):
    # Run from elsewhere, without PYTHONPATH: the file's directory is searched first, in the trainer and in
    # the child process that serves the environment.
    file = project / "mix.yaml"
    file.write_text('members:\n  words: {target: "wordenv_mod:WordEnv", num_tasks: 1}\n')
    code = textwrap.dedent(
        f"""
        from ormix.mixture import load_mixture
        mix = load_mixture({str(file)!r})
        ep = mix.spec("words").environment_factory()
        print(ep.reset(task_index=0))
        ep.say(word="hi")
        print(mix.reward_funcs[0](environments=[ep]))
        mix.close()
        """
    )
    env = {k: v for k, v in __import__("os").environ.items() if k not in ("PYTHONPATH", "ORMIX_LOCAL_SERVE")}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "say hi" in out.stdout and "[1.0]" in out.stdout
