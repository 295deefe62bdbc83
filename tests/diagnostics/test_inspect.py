"""`ormix inspect`: what a mixture will do, shown without training, and without keys it does not need."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from ormix.app import app
from ormix.app._inspect import inspect_mixture
from ormix.mixture import load_mixture

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_catalog_mixture_inspects_without_an_api_key(monkeypatch):
    # The plan needs no server: composition from the config, task counts from num_tasks; what needs the
    # catalog (tasks behind a where= filter, tools) is named as not shown, with the variable to set.
    monkeypatch.delenv("OPENREWARD_API_KEY", raising=False)
    result = runner.invoke(
        app, ["inspect", str(ROOT / "mixtures/seta-endless-curriculum.yaml")], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    assert "not shown: no API key for catalog target 'Eigent/SETA'" in result.output
    assert "export OPENREWARD_API_KEY=" in result.output
    assert "composition" in result.output and "step 1" in result.output
    mix = load_mixture(str(ROOT / "mixtures/seta-endless-curriculum.yaml"), defer_missing_secrets=True)
    info = inspect_mixture(mix)
    assert [m.tasks for m in info.members] == [512, None]  # seta's where= matches are the server's to say
    # The first step of the schedule: 80/20 of 32 prompts.
    assert info.composition[0] == ("step 1", {"seta": 6, "terminals": 26})
    assert info.rows == 16000


def test_a_missing_secret_variable_still_fails_when_the_secret_is_used(monkeypatch):
    import pytest

    from ormix._errors import UsageError

    monkeypatch.delenv("OPENREWARD_API_KEY", raising=False)
    mix = load_mixture(str(ROOT / "mixtures/seta-endless-curriculum.yaml"), defer_missing_secrets=True)
    with pytest.raises(UsageError, match="OPENREWARD_API_KEY is not set"):
        mix.spec("seta").effective_secrets()


def test_namespaced_routing_shows_the_names_the_model_sees(tmp_path):
    file = tmp_path / "ns.yaml"
    file.write_text(
        "members:\n"
        "  echo: {target: 'local:echo', num_tasks: 2, local_serve: thread}\n"
        "  terminals: {target: 'local:terminals', num_tasks: 2, local_serve: thread}\n"
        "routing: namespaced\nprompts_per_step: 2\nnum_samples: 4\n"
    )
    info = inspect_mixture(load_mixture(str(file)))
    echo = next(m for m in info.members if m.name == "echo")
    assert echo.tasks == 2 and echo.unknown is None
    assert "echo__echo" in echo.tools and "echo__submit" in echo.tools


def test_inspect_shows_the_eval_set_ormix_uses_when_no_member_names_one(tmp_path):
    # `ormix eval` and `ormix train` evaluate a member without `eval:` on its environment's test split (else
    # its training tasks); inspect used to show no eval set at all for such a member.
    path = tmp_path / "mix.yaml"
    path.write_text(
        "members:\n  echo: {target: 'local:echo', num_tasks: 2, local_serve: thread}\n"
        "  held: {target: 'local:echo', indices: [5], local_serve: thread, eval: {num_tasks: 1}}\n"
    )
    info = inspect_mixture(load_mixture(str(path)))
    echo, held = (m.eval_set for m in info.members)
    assert (echo.split, echo.task_indices, echo.overlap) == ("test", (0, 1, 2, 3), 0)
    assert echo.source == "split 'test': no eval: set, so its environment's test split"
    assert (held.split, held.task_indices) == ("train", (0,))  # its own eval: set, as before
    result = runner.invoke(app, ["inspect", str(path)], terminal_width=250)
    assert result.exit_code == 0, result.output
    rows = {
        cells[0]: cells
        for line in result.output.split("eval sets")[1].splitlines()
        if line.startswith("│ ") and (cells := [c.strip() for c in line.split("│")[1:-1]])
    }
    assert rows["echo"][:3] == ["echo", "test", "4 (0, 1, 2, 3)"], result.output
    offline = inspect_mixture(load_mixture(str(path)), contact_servers=False).members[0]
    assert offline.eval_set is None and "test split if it has one" in (offline.eval_unknown or "")


def test_inspect_shows_which_tasks_the_platform_prior_sets_aside_and_why(tmp_path, monkeypatch):
    # Through the platform double (a stand-in for the OpenReward platform, in front of a real local server):
    # its task-difficulty rows are what the platform's logged rollouts would say of the member's tasks.
    from ormix.server import serve_in_thread
    from support.platform_double import PlatformDouble

    rows = [
        {"task_index": 0, "avg_reward": 1.0, "min_reward": 1.0, "max_reward": 1.0, "num_rollouts": 12},
        {"task_index": 1, "avg_reward": 0.0, "min_reward": 0.0, "max_reward": 0.0, "num_rollouts": 9},
        {"task_index": 2, "avg_reward": 0.0, "min_reward": 0.0, "max_reward": 0.0, "num_rollouts": 3},
        {"task_index": 3, "avg_reward": 0.5, "min_reward": 0.0, "max_reward": 1.0, "num_rollouts": 40},
        {"task_index": 9, "avg_reward": 1.0, "min_reward": 1.0, "max_reward": 1.0, "num_rollouts": 40},
    ]
    path = tmp_path / "prior.yaml"
    path.write_text(
        """\
members:
  echo: {target: "Owner/Echo", num_tasks: 4, discover_task_tools: false, filter: {prior: platform}}
  plain: {target: "local:echo", num_tasks: 2, local_serve: thread}
strategy: adaptive
prompts_per_step: 2
"""
    )
    with (
        serve_in_thread(["local:echo"]) as upstream,
        PlatformDouble({"Owner/Echo": (upstream.url, "echo")}) as p,
    ):
        p.task_difficulty["Owner/Echo"] = [{**r, "split": "train"} for r in rows] + [
            {**rows[3], "task_index": 0, "split": "test"}  # another split's rollouts are not this member's
        ]
        for name, value in p.env().items():
            monkeypatch.setenv(name, value)
        result = runner.invoke(app, ["inspect", str(path)], terminal_width=250)
        assert result.exit_code == 0, result.output
        out = " ".join(result.output.split())
        assert (
            "echo: the platform prior sets 2 of 4 task(s) aside for steps 1-8: task 0 (all 12 logged "
            "rollouts solved it), task 1 (all 9 logged rollouts failed it)"
        ) in out
        assert (
            "1 task(s) start with their logged rollouts as credit" in out
            and "task 2 (3 rollouts, all failed)" in out
        )
        assert (
            "task 3" not in out and "task 9" not in out
        )  # rewards that differ teach; task 9 is not selected
        assert "plain: the platform" not in out  # a local member has no logged rollouts
        # The platform was asked as the SDK asks, for the member's split.
        asked = [r for r in p.records if r.path.endswith("/task-difficulty")]
        assert [r.body for r in asked] == [{"split": "train"}]
        # The plan training builds starts with those tasks aside.
        mix = load_mixture(str(path))
        try:
            assert mix.planner.tasks_set_aside("echo", 1) == mix.planner.tasks_set_aside("echo", 2) == 2
            assert {t for m, t in mix.planner.rows(1) + mix.planner.rows(2) if m == "echo"} <= {2, 3}
        finally:
            mix.close()


def test_a_batch_below_one_or_negative_steps_are_refused_with_one_error_line(tmp_path):
    file = tmp_path / "echo.yaml"
    file.write_text("members:\n  echo: {target: 'local:echo', num_tasks: 2, local_serve: thread}\n")
    for argv in (["--batch", "0"], ["--batch", "-3"], ["--steps", "-1"]):
        result = runner.invoke(app, ["inspect", str(file), *argv], terminal_width=200)
        errors = [line for line in result.output.splitlines() if line.startswith("error:")]
        assert result.exit_code == 2 and len(errors) == 1, (argv, result.output)
        assert argv[0] in errors[0] and "Traceback" not in result.output, (argv, result.output)
