"""Mixture files: shipped files load, every invalid case gets its own actionable message, secrets stay
secret, and the YAML round trip, ablation helpers and config hash behave."""

from __future__ import annotations

import json
import pickle
import re
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from ormix.config import (
    EvalConfig,
    MemberConfig,
    MixtureConfig,
    MixtureConfigError,
    Secret,
    load_mixture_config,
)

MIXTURES = Path(__file__).resolve().parents[2] / "mixtures"
PLANTED = "s3cr3t-PLANTED-9f8e7d"  # a secret value that must never show up anywhere printable
ENV = {"OPENREWARD_API_KEY": PLANTED}


def load(text: str, environ: dict[str, str] | None = None, source: str = "mix.yaml") -> MixtureConfig:
    # Target resolution (importing module:Class targets) is tested in test_resolution.py; these are about the
    # config's own rules, with fictional modules.
    return MixtureConfig.from_yaml_text(
        textwrap.dedent(text), source, environ=ENV if environ is None else environ, resolve_targets=False
    )


def problems_of(text: str, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(MixtureConfigError) as info:
        load(text, environ)
    return str(info.value)


def line_with(message: str, *needles: str) -> str:
    """The one problem line that contains every needle (fails if none does)."""
    for line in message.splitlines()[1:]:
        if all(n in line for n in needles):
            return line
    raise AssertionError(f"no problem line with {needles!r} in:\n{message}")


def two(extra: str) -> str:
    """The two-member mixture below plus more top-level keys."""
    return TWO + textwrap.dedent(extra)


TWO = """
members:
  terminals: {target: "local:terminals", num_tasks: 8}
  seta: {target: "local:seta", num_tasks: 8}
"""


# ---------------------------------------------------------------------------------------------- shipped files


@pytest.mark.parametrize("path", sorted(MIXTURES.glob("*.yaml")), ids=lambda p: p.name)
def test_every_shipped_file_loads_and_round_trips(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENREWARD_API_KEY", PLANTED)
    cfg = load_mixture_config(path)
    assert cfg.train_members
    assert MixtureConfig.from_yaml_text(cfg.to_yaml(), resolve_targets=False) == cfg
    assert PLANTED not in cfg.to_yaml() and PLANTED not in repr(cfg)


def test_shipped_files_are_the_expected_four() -> None:
    assert {p.name for p in MIXTURES.glob("*.yaml")} >= {
        "local-demo.yaml",
        "seta-endless-curriculum.yaml",
        "single-seta.yaml",
        "leave-one-out-seta.yaml",
    }


def test_local_demo_is_small_and_local() -> None:
    cfg = load_mixture_config(MIXTURES / "local-demo.yaml", environ={})
    assert cfg.name == "local-demo"
    assert [m.parsed_target.kind for m in cfg.members.values()] == ["local", "local", "local"]
    assert cfg.strategy == "adaptive"
    assert cfg.static_weights() == {"echo": 0.2, "terminals": 0.4, "seta": 0.4}
    assert cfg.prompts_per_step == 4 and cfg.seed == 0
    assert cfg.warm_start is not None and cfg.warm_start.near_misses and cfg.warm_start.fraction == 1.0
    t = cfg.train
    assert t["max_steps"] <= 40 and t["num_generations"] == 2
    # The step size the plan assumes is the one the trainer will use.
    assert t["per_device_train_batch_size"] * t["gradient_accumulation_steps"] // t["num_generations"] == 4
    assert t["learning_rate"] == pytest.approx(5e-4)
    assert t["save_steps"] <= t["max_steps"]  # a run can be resumed


def test_curriculum_schedule_and_secret_reference(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENREWARD_API_KEY", PLANTED)
    cfg = load_mixture_config(MIXTURES / "seta-endless-curriculum.yaml")
    assert [str(m.parsed_target) for m in cfg.members.values()] == ["kanishk/EndlessTerminals", "Eigent/SETA"]
    assert [p.until_step for p in cfg.schedule or []] == [100, 300, None]
    assert cfg.schedule[0].interpolate and cfg.schedule[0].weights == {"terminals": 0.8, "seta": 0.2}
    seta = cfg.members["seta"]
    assert seta.secret_values() == {"api_key": PLANTED}
    assert seta.secrets["api_key"].env_vars == ("OPENREWARD_API_KEY",)
    assert seta.resolved_api_key_env == "OPENREWARD_API_KEY"
    assert cfg.eval_members == ["seta"]
    t = cfg.train
    per_step = t["per_device_train_batch_size"] * t["gradient_accumulation_steps"] * 8 // t["num_generations"]
    assert per_step == cfg.prompts_per_step  # the comment's arithmetic for one 8-GPU node


def test_curriculum_without_api_key_names_the_variable() -> None:
    with pytest.raises(MixtureConfigError) as info:
        load_mixture_config(MIXTURES / "seta-endless-curriculum.yaml", environ={})
    msg = str(info.value)
    line = line_with(msg, "members.seta.secrets.api_key")
    assert "OPENREWARD_API_KEY is not set" in line and "export OPENREWARD_API_KEY=" in line
    assert "seta-endless-curriculum.yaml:" in line


def test_leave_one_out_file_is_what_without_derives() -> None:
    curriculum = load_mixture_config(MIXTURES / "seta-endless-curriculum.yaml", environ=ENV)
    shipped = load_mixture_config(MIXTURES / "leave-one-out-seta.yaml", environ=ENV)
    assert shipped == curriculum.without("seta")
    assert "ormix ablate" in (MIXTURES / "leave-one-out-seta.yaml").read_text()


def test_single_seta() -> None:
    cfg = load_mixture_config(MIXTURES / "single-seta.yaml", environ=ENV)
    assert list(cfg.members) == ["seta"] and cfg.members["seta"].target == "Eigent/SETA"


# ------------------------------------------------------------------------------------ one message per problem


def test_num_tasks_with_indices() -> None:
    msg = problems_of(
        """
        members:
          seta: {target: "local:seta", num_tasks: 4, indices: [0, 1]}
        """
    )
    line = line_with(msg, "members.seta.num_tasks")
    assert "use either num_tasks or indices, not both" in line
    assert line.strip().startswith("mix.yaml:3: ")


def test_eval_section_num_tasks_with_indices() -> None:
    msg = problems_of(
        """
        members:
          seta:
            target: "local:seta"
            eval: {num_tasks: 4, indices: [0]}
        """
    )
    assert "use either num_tasks or indices, not both" in line_with(msg, "members.seta.eval.num_tasks")


def test_unknown_member_in_weights() -> None:
    msg = problems_of(TWO + "weights: {terminals: 1, setaa: 1}\n")
    line = line_with(msg, "weights.setaa")
    assert "unknown member 'setaa'" in line and "did you mean 'seta'?" in line
    assert "terminals, seta" in line  # names the known members
    # seta has no weight now: that is its own problem, with the fix
    assert "add them" in line_with(msg, "weights:", "no weight to train member(s) seta")


def test_unknown_member_in_schedule_phase() -> None:
    msg = problems_of(
        two(
            """
        prompts_per_step: 4
        schedule:
          - {until_step: 10, weights: {terminals: 1, seta: 0, other: 1}}
          - {weights: {terminals: 1, seta: 1}}
        """
        )
    )
    assert "unknown member 'other'" in line_with(msg, "schedule[0].weights.other")


def test_negative_weight() -> None:
    msg = problems_of(TWO + "weights: {terminals: 1, seta: -0.5}\n")
    assert "is negative (-0.5); weights must be >= 0" in line_with(msg, "weights.seta")


def test_negative_member_weight() -> None:
    msg = problems_of(
        """
        members:
          terminals: {target: "local:terminals", weight: 1}
          seta: {target: "local:seta", weight: -2}
        """
    )
    assert "is negative (-2.0); weights must be >= 0" in line_with(msg, "members.seta.weight")


def test_all_zero_weights() -> None:
    msg = problems_of(TWO + "weights: {terminals: 0, seta: 0.0}\n")
    assert "give at least one a weight > 0" in line_with(msg, "weights:", "is 0")


def test_all_zero_weights_ignores_eval_members() -> None:
    msg = problems_of(
        """
        members:
          a: {target: "local:terminals"}
          b: {target: "local:seta", role: eval}
        weights: {a: 0}
        """
    )
    assert "give at least one a weight > 0" in line_with(msg, " weights:")


def test_phases_out_of_order() -> None:
    msg = problems_of(
        two(
            """
        prompts_per_step: 4
        schedule:
          - {until_step: 100, weights: {terminals: 1, seta: 0}}
          - {until_step: 50, weights: {terminals: 0, seta: 1}}
          - {weights: {terminals: 1, seta: 1}}
        """
        )
    )
    line = line_with(msg, "schedule[1].until_step")
    assert "50 does not come after the previous phase's 100" in line and "strictly increasing" in line


def test_a_first_phase_must_hold_a_step() -> None:
    # until_step is exclusive and steps count from 1: `until_step: 1` would be a phase of no step.
    msg = problems_of(
        two(
            """
        prompts_per_step: 4
        schedule:
          - {until_step: 1, weights: {terminals: 1, seta: 0}}
          - {weights: {terminals: 0, seta: 1}}
        """
        )
    )
    assert "1 does not come after step 1, the first step" in line_with(msg, "schedule[0].until_step")


def test_open_ended_phase_only_last() -> None:
    msg = problems_of(
        two(
            """
        prompts_per_step: 4
        schedule:
          - {weights: {terminals: 1, seta: 0}}
          - {until_step: 50, weights: {terminals: 0, seta: 1}}
        """
        )
    )
    assert "only the last phase may be open-ended" in line_with(msg, "schedule[0].until_step")


def test_interpolate_on_last_phase() -> None:
    msg = problems_of(
        two(
            """
        prompts_per_step: 4
        schedule:
          - {weights: {terminals: 1, seta: 1}, interpolate: true}
        """
        )
    )
    assert "remove interpolate" in line_with(msg, "schedule[0].interpolate")


def test_schedule_without_prompts_per_step() -> None:
    msg = problems_of(
        two(
            """
        schedule:
          - {until_step: 10, weights: {terminals: 1, seta: 0}}
          - {weights: {terminals: 0, seta: 1}}
        """
        )
    )
    assert "add `prompts_per_step: N`" in line_with(msg, "prompts_per_step")


def test_schedule_with_static_weights_or_other_strategy() -> None:
    msg = problems_of(
        two(
            """
        weights: {terminals: 1, seta: 1}
        strategy: temperature
        prompts_per_step: 4
        schedule:
          - {weights: {terminals: 1, seta: 1}}
        """
        )
    )
    assert "remove `weights:`" in line_with(msg, "schedule:", "both static weights and a schedule")
    assert "does not use weights" in line_with(msg, "strategy:", "temperature")
    assert "a schedule needs strategy: weights" in line_with(msg, "strategy:", "schedule")


def test_duplicate_member_names_report_both_lines() -> None:
    msg = problems_of(
        """
        members:
          seta: {target: "local:seta"}
          terminals: {target: "local:terminals"}
          seta: {target: "Eigent/SETA"}
        """
    )
    line = line_with(msg, "members.seta", "duplicate key 'seta'")
    assert line.strip().startswith("mix.yaml:5: ") and "first on line 3" in line
    assert "rename or remove one" in line


def test_duplicate_keys_anywhere() -> None:
    msg = problems_of(TWO + "seed: 1\nseed: 2\n")
    assert "duplicate key 'seed'" in line_with(msg, "seed")


def test_invalid_target() -> None:
    msg = problems_of(
        """
        members:
          seta: {target: "Eigent"}
        """
    )
    line = line_with(msg, "members.seta.target")
    assert "invalid target 'Eigent'" in line
    for example in ("Eigent/SETA", "http://localhost:8080", "local:terminals", "my_pkg.envs:MyEnv"):
        assert example in line


@pytest.mark.parametrize(
    ("snippet", "path", "fix"),
    [
        (
            "members:\n  seta: {target: 'local:seta', num_task: 3}\n",
            "members.seta.num_task",
            "did you mean 'num_tasks'?",
        ),
        (TWO + "wieghts: {terminals: 1, seta: 1}\n", "wieghts", "did you mean 'weights'?"),
        (
            TWO + "schedule:\n  - {until: 3, weights: {terminals: 1, seta: 1}}\nprompts_per_step: 2\n",
            "schedule[0].until",
            "did you mean 'until_step'?",
        ),
        (
            "members:\n  seta: {target: 'local:seta', eval: {splt: test}}\n",
            "members.seta.eval.splt",
            "did you mean 'split'?",
        ),
        (
            "members:\n  seta: {target: 'local:seta', zzz: 1}\n",
            "members.seta.zzz",
            "remove it or use one of: target",
        ),
    ],
)
def test_unknown_keys_suggest(snippet: str, path: str, fix: str) -> None:
    msg = problems_of(snippet)
    line = line_with(msg, f" {path}:", "unknown key")
    assert fix in line


def test_eval_only_member_with_weight() -> None:
    msg = problems_of(
        """
        members:
          train_env: {target: "local:terminals"}
          held_out: {target: "local:seta", role: eval, weight: 1}
        """
    )
    assert "remove weight or set role: both" in line_with(msg, "members.held_out.weight")
    msg = problems_of(
        """
        members:
          train_env: {target: "local:terminals"}
          held_out: {target: "local:seta", role: eval}
        weights: {train_env: 1, held_out: 1}
        """
    )
    assert "remove it from weights or set its role to both" in line_with(msg, "weights.held_out")


def test_no_train_member() -> None:
    msg = problems_of(
        """
        members:
          a: {target: "local:seta", role: eval}
        """
    )
    assert "set role: train or both" in line_with(msg, "members:", "no member is trained on")


def test_empty_members_and_missing_members() -> None:
    assert "add at least one environment" in line_with(problems_of("members: {}\n"), "members:")
    assert "required key 'members' is missing" in line_with(problems_of("seed: 1\n"), "members:")
    assert "required key 'target' is missing" in line_with(
        problems_of("members:\n  a: {num_tasks: 3}\n"), "members.a.target"
    )


def test_weights_both_top_level_and_per_member() -> None:
    msg = problems_of(
        """
        members:
          a: {target: "local:terminals", weight: 1}
          b: {target: "local:seta", weight: 1}
        weights: {a: 1, b: 1}
        """
    )
    assert "keep one of the two" in line_with(msg, "weights:", "members.a.weight")


def test_partial_member_weights() -> None:
    msg = problems_of(
        """
        members:
          a: {target: "local:terminals", weight: 1}
          b: {target: "local:seta"}
        """
    )
    assert "give every train member a weight" in line_with(msg, "members.b.weight")


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("Seta", "lowercase letter"),
        ("my__env", "contains '__'"),
        ("env_", "ends with '_'"),
        ("x" * 33, "at most 32"),
        ("9env", "lowercase letter"),
    ],
)
def test_member_names(name: str, why: str) -> None:
    msg = problems_of(f"members:\n  {name}: {{target: 'local:seta'}}\n")
    assert why in line_with(msg, f"members.{name}:")


@pytest.mark.parametrize(
    ("snippet", "path", "expected"),
    [
        ("num_tasks: many", "members.a.num_tasks", "write a whole number"),
        ("num_tasks: 0", "members.a.num_tasks", "greater than or equal to 1"),
        ("role: trian", "members.a.role", "got 'trian'; did you mean 'train'?"),
        ("transport: sdk", "members.a.transport", "unknown key 'transport'; remove it"),
        ("scale: 0", "members.a.scale", "greater than 0"),
        ("unscored_reward: .nan", "members.a.unscored_reward", "finite"),
        ("indices: [1, -2]", "members.a.indices", "remove negative indices"),
        ("where: {difficulty: {a: 1}}", "members.a.where.difficulty", "a list of them"),
        ("where: {difficulty: []}", "members.a.where.difficulty", "matches no task"),
        ("api_key_env: sk-123", "members.a.api_key_env", "NAME of an environment variable"),
        ("secrets: {api_key: 12}", "members.a.secrets.api_key", "quote it"),
        ("include_metadata: maybe", "members.a.include_metadata", "write true or false"),
    ],
)
def test_member_field_messages(snippet: str, path: str, expected: str) -> None:
    msg = problems_of(f"members:\n  a:\n    target: 'local:seta'\n    {snippet}\n")
    assert expected in line_with(msg, f" {path}:")


def test_mixture_field_messages() -> None:
    msg = problems_of(TWO + "strategy: wieghts\ntemperature: 0\nrouting: magic\nseed: -1\nname: 'bad name'\n")
    assert "did you mean 'weights'?" in line_with(msg, " strategy:")
    assert "greater than 0" in line_with(msg, " temperature:")
    assert "'auto', 'per_env' or 'namespaced'" in line_with(msg, " routing:")
    assert "greater than or equal to 0" in line_with(msg, " seed:")
    assert "letters, digits" in line_with(msg, " name:")


def test_many_problems_all_reported_one_per_line_each_naming_the_file() -> None:
    text = """
    members:
      seta:
        target: "local:seta"
        num_tasks: 4
        indices: [1]
        num_task: 3
      term:
        target: "nowhere"
      judge: {target: "local:echo", role: eval, weight: 1}
    weights: {seta: -1, term: 1, ghost: 1}
    schedule:
      - {weights: {seta: 1, term: 1}}
      - {until_step: 5, weights: {seta: 1, term: 1}}
    """
    with pytest.raises(MixtureConfigError) as info:
        load(text, source="mixtures/broken.yaml")
    err = info.value
    lines = str(err).splitlines()
    assert lines[0] == f"mixtures/broken.yaml: {len(err.problems)} problems in the mixture config:"
    assert len(lines) == len(err.problems) + 1
    assert all(line.startswith("  mixtures/broken.yaml:") for line in lines[1:])
    expected_paths = {
        "members.seta.num_tasks",
        "members.seta.num_task",
        "members.term.target",
        "members.judge.weight",
        "weights.seta",
        "weights.ghost",
        "schedule",
        "schedule[0].until_step",
        "prompts_per_step",
    }
    assert expected_paths <= {p.key_path for p in err.problems}
    assert "Traceback" not in str(err) and "pydantic" not in str(err) and "input_value" not in str(err)


def test_yaml_syntax_error_names_line() -> None:
    msg = problems_of("members:\n  seta: {target: 'local:seta'\nseed: 1\n")
    assert "YAML syntax error" in msg and re.search(r"mix\.yaml:\d+: \(top level\)", msg)


@pytest.mark.parametrize(("text", "expected"), [("", "the file is empty"), ("- a\n- b\n", "got a list")])
def test_not_a_mapping(text: str, expected: str) -> None:
    assert expected in problems_of(text)


def test_missing_file() -> None:
    with pytest.raises(MixtureConfigError, match="file not found"):
        load_mixture_config("mixtures/does-not-exist.yaml")


def test_name_defaults_to_file_stem(tmp_path: Path) -> None:
    path = tmp_path / "my mix.yaml"
    path.write_text(TWO)
    assert load_mixture_config(path).name == "my-mix"
    assert MixtureConfig.from_yaml_text(TWO).name == "mixture"
    assert MixtureConfig.from_yaml_text("name: given\n" + TWO, "x/other.yaml").name == "given"


def test_exponent_floats_are_numbers() -> None:
    cfg = load(TWO + "train: {learning_rate: 1e-5, x: 2E3, y: 1.0e-6}\n")
    assert cfg.train == {"learning_rate": 1e-5, "x": 2000.0, "y": 1e-6}


# ---------------------------------------------------------------------------------------------- Python API


def test_python_construction_raises_clean_pydantic_error() -> None:
    with pytest.raises(ValidationError) as info:
        MixtureConfig(members={"a": {"target": "local:seta", "num_tasks": 2, "indices": [0]}})
    assert "use either num_tasks or indices, not both" in str(info.value)
    with pytest.raises(MixtureConfigError) as info2:
        MixtureConfig.from_dict({"members": {"a": {"target": "bad"}}}, source="api")
    assert "api: members.a.target: invalid target 'bad'" in str(info2.value)


def test_member_defaults() -> None:
    m = MemberConfig(target="Eigent/SETA")
    assert (m.split, m.role, m.scale, m.include_metadata, m.discover_task_tools) == (
        "train",
        "train",
        1.0,
        True,
        True,
    )
    assert m.resolved_api_key_env == "OPENREWARD_API_KEY"
    assert m.resolve_api_key({"OPENREWARD_API_KEY": "k"}) == "k" and m.resolve_api_key({}) is None
    assert MemberConfig(target="local:seta").resolved_api_key_env is None
    assert MemberConfig(target="http://h:1", api_key_env="MY_KEY").resolve_api_key({"MY_KEY": "v"}) == "v"


def test_static_weights() -> None:
    assert load(TWO).static_weights() == {"terminals": 1.0, "seta": 1.0}
    assert load(TWO + "strategy: round_robin\n").static_weights() is None
    per = load(
        """
        members:
          a: {target: "local:terminals", weight: 3}
          b: {target: "local:seta", weight: 1}
        """
    )
    assert per.static_weights() == {"a": 3.0, "b": 1.0}


# ---------------------------------------------------------------------------------------------- secrets


SECRET_FILE = """
members:
  seta:
    target: Eigent/SETA
    secrets:
      api_key: ${OPENREWARD_API_KEY}
      literal: sk-literal-LEAK-1234
      mixed: "Bearer ${OPENREWARD_API_KEY}"
      escaped: "a$${b}"
"""


def test_secrets_expand_from_os_environ(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENREWARD_API_KEY", PLANTED)
    cfg = MixtureConfig.from_yaml_text(SECRET_FILE)
    assert cfg.members["seta"].secret_values() == {
        "api_key": PLANTED,
        "literal": "sk-literal-LEAK-1234",
        "mixed": f"Bearer {PLANTED}",
        "escaped": "a${b}",
    }


def test_secret_values_never_printable() -> None:
    cfg = load(SECRET_FILE)
    member = cfg.members["seta"]
    printable = [
        repr(cfg),
        str(cfg),
        repr(member),
        str(member.secrets),
        repr(member.secrets["literal"]),
        json.dumps(cfg.manifest_dict()),
        cfg.config_hash(),
    ]
    for text in printable:
        assert PLANTED not in text and "sk-literal-LEAK-1234" not in text
    assert repr(member.secrets["api_key"]) == "Secret(from $OPENREWARD_API_KEY)"
    assert repr(member.secrets["literal"]) == "Secret('**********')"
    assert cfg.manifest_dict()["members"]["seta"]["secrets"] == ["api_key", "escaped", "literal", "mixed"]
    # references stay references in derived files
    assert "${OPENREWARD_API_KEY}" in cfg.to_yaml() and PLANTED not in cfg.to_yaml()
    assert pickle.loads(pickle.dumps(cfg)) == cfg


def test_secret_values_never_in_errors() -> None:
    broken = SECRET_FILE.replace("target: Eigent/SETA", "target: Eigent/SETA\n    num_task: 3\n    role: x")
    broken += "weights: {seta: -1}\n"
    with pytest.raises(MixtureConfigError) as info:
        load(broken)
    assert "sk-literal-LEAK-1234" not in str(info.value) and PLANTED not in str(info.value)
    assert len(info.value.problems) >= 3
    with pytest.raises(ValidationError) as info2:
        MixtureConfig.model_validate(
            {"members": {"s": {"target": "x/y", "role": "bad", "secrets": {"k": "sk-literal-LEAK-1234"}}}}
        )
    assert "sk-literal-LEAK-1234" not in str(info2.value)
    assert "sk-literal-LEAK-1234" not in repr(info2.value.errors())
    with pytest.raises(ValidationError) as info3:  # a `missing` error's input is the whole member mapping
        MixtureConfig.model_validate({"members": {"s": {"secrets": {"k": "sk-literal-LEAK-1234"}}}})
    assert "sk-literal-LEAK-1234" not in repr(info3.value.errors()) + str(info3.value)


def test_missing_env_var_is_named() -> None:
    msg = problems_of(SECRET_FILE, environ={})
    line = line_with(msg, "members.seta.secrets.api_key")
    assert "environment variable OPENREWARD_API_KEY is not set" in line
    assert "export OPENREWARD_API_KEY=" in line
    assert "sk-literal-LEAK-1234" not in msg


def test_malformed_reference_does_not_echo_the_text() -> None:
    msg = problems_of("members:\n  a:\n    target: x/y\n    secrets: {k: 'pa${ss word}'}\n")
    assert "ss word" not in msg and "$${" in line_with(msg, "members.a.secrets.k")


def test_secret_expand_direct() -> None:
    s = Secret.expand("${A}-${B}", {"A": "1", "B": "2"})
    assert s.get_secret_value() == "1-2" and s.env_vars == ("A", "B") and s.is_reference
    with pytest.raises(ValueError, match="B is not set"):
        Secret.expand("${A}${B}", {"A": "1", "B": ""})


# ---------------------------------------------------------------------------------------------- round trip


FULL = """
name: full
members:
  terminals:
    target: "local:terminals"
    num_tasks: 8
    where: {difficulty: [easy, medium], verified: true, level: 2}
    scale: 0.5
    unscored_reward: 0.0
  seta:
    target: "http://localhost:8080"
    env_name: seta
    indices: [3, 1, 2]
    split: test
    role: both
    eval: {split: test, num_tasks: 4}
    secrets: {api_key: "${OPENREWARD_API_KEY}", other: literal-value}
    api_key_env: OTHER_KEY
    include_metadata: false
    discover_task_tools: false
    task_tools_discovery_index: 2
  judge: {target: "my_pkg.envs:Judge", role: eval}
schedule:
  - {until_step: 10, weights: {terminals: 0.8, seta: 0.2}, interpolate: true}
  - {weights: {terminals: 0.2, seta: 0.8}}
prompts_per_step: 8
num_samples: 128
routing: namespaced
seed: 7
train: {max_steps: 3, learning_rate: 1e-5}
telemetry: {min_coverage: 0.5}
"""


def test_to_yaml_round_trips_every_field() -> None:
    cfg = load(FULL)
    text = cfg.to_yaml(header="derived by a test\nsecond line")
    assert text.startswith("# derived by a test\n# second line\n")
    again = MixtureConfig.from_yaml_text(text, environ=ENV, resolve_targets=False)
    assert again == cfg
    assert again.to_yaml() == cfg.to_yaml()
    assert "indices: [3, 1, 2]" in text  # short lists stay on one line
    assert "literal-value" in text  # literal secrets are written back as they were (documented)


# ---------------------------------------------------------------------------------------------- ablations


THREE = """
name: three
members:
  a: {target: "local:terminals"}
  b: {target: "local:seta"}
  c: {target: "local:echo"}
  held: {target: "local:echo", role: eval}
prompts_per_step: 4
schedule:
  - {until_step: 10, weights: {a: 1, b: 0, c: 0}}
  - {weights: {a: 1, b: 1, c: 1}}
"""


def test_without() -> None:
    cfg = load(THREE)
    w = cfg.without("b")
    assert list(w.members) == ["a", "b", "c", "held"] and w.name == "three-without-b"
    # Not trained on, still evaluated: as in the full mixture (it had no eval: section).
    assert w.train_members == ["a", "c"] and w.eval_members == ["b", "held"]
    assert w.members["b"].eval == EvalConfig(split="test", fallback="own_tasks")
    assert w.members["b"].role == "eval" and w.members["b"].target == cfg.members["b"].target
    assert [p.weights for p in w.schedule or []] == [{"a": 1.0, "c": 0.0}, {"a": 1.0, "c": 1.0}]
    assert cfg.members.keys() == {"a", "b", "c", "held"}  # the original is untouched
    assert cfg.members["b"].role == "train"
    assert list(cfg.without("b", as_eval=False).members) == ["a", "c", "held"]
    one = cfg.without("b", "c")
    assert one.train_members == ["a"] and one.schedule is None and one.weights is None
    assert one.eval_members == ["b", "c", "held"]
    assert MixtureConfig.from_yaml_text(one.to_yaml()) == one
    assert MixtureConfig.from_yaml_text(w.to_yaml()) == w


def test_without_keeps_a_dropped_members_eval_set_and_drops_its_weight() -> None:
    cfg = load(
        """
        members:
          a: {target: "local:terminals", weight: 1}
          b: {target: "local:seta", weight: 2, role: both, eval: {split: test, num_tasks: 3}}
        prompts_per_step: 2
        """
    )
    b = cfg.without("b").members["b"]
    assert (b.role, b.weight, b.eval) == ("eval", None, cfg.members["b"].eval)


def test_without_a_needed_member_reports_why() -> None:
    cfg = load(THREE)
    with pytest.raises(MixtureConfigError) as info:
        cfg.without("b", "c", "a")
    assert "without('b', 'c', 'a') leaves no member to train on; keep at least one of a, b, c" in str(
        info.value
    )
    assert len(info.value.problems) == 1  # not also the empty weights it would leave


def test_without_the_only_weighted_member_weighs_the_rest_equally() -> None:
    # Phase 0 trains on a alone: without a, b and c share it rather than the derived file failing.
    w = load(THREE).without("a")
    assert [p.weights for p in w.schedule or []] == [{"b": 1.0, "c": 1.0}, {"b": 1.0, "c": 1.0}]
    members = textwrap.dedent(
        """
        members:
          a: {target: "local:terminals"%s}
          b: {target: "local:seta"%s}
          c: {target: "local:echo"%s}
        """
    )
    weights = load(members % ("", "", "") + "weights: {a: 1, b: 0, c: 0}\n")
    assert weights.without("a").weights == {"b": 1.0, "c": 1.0}
    per_member = load(members % (", weight: 1", ", weight: 0", ", weight: 0")).without("a")
    assert per_member.static_weights() == {"b": 1.0, "c": 1.0}
    assert MixtureConfig.from_yaml_text(per_member.to_yaml()) == per_member
    # Weights that are not all 0 stay as they were.
    assert load(THREE).without("b").schedule[0].weights == {"a": 1.0, "c": 0.0}  # type: ignore[index]


def test_only() -> None:
    cfg = load(THREE)
    o = cfg.only("c", "a")
    assert list(o.members) == ["a", "b", "c", "held"] and o.name == "three-only-a-c"
    assert o.train_members == ["a", "c"] and o.eval_members == ["b", "held"]
    assert list(cfg.only("c", "a", as_eval=False).members) == ["a", "c"]
    single = cfg.only("b")
    assert single.train_members == ["b"] and single.schedule is None


def test_reweight() -> None:
    cfg = load(THREE)
    r = cfg.reweight(a=0.5, b=0.25, c=0.25)
    assert r.schedule is None and r.static_weights() == {"a": 0.5, "b": 0.25, "c": 0.25}
    assert r.name == "three-reweight-a0.5-b0.25-c0.25"
    two = load(TWO + "weights: {terminals: 3, seta: 1}\n")
    assert two.reweight(seta=3).weights == {"terminals": 3.0, "seta": 3.0}
    with pytest.raises(MixtureConfigError, match="role: eval"):
        cfg.reweight(held=1.0)
    with pytest.raises(MixtureConfigError, match="negative"):
        cfg.reweight(a=-1)


def test_reweight_keeps_the_weights_the_others_start_with() -> None:
    members = textwrap.dedent(
        """
        members:
          a: {target: "local:terminals"}
          b: {target: "local:seta"%s}
          c: {target: "local:echo", num_tasks: 9}
        prompts_per_step: 4
        """
    )
    # Adaptive: its settings and task filters are about adaptive mixing, gone with it.
    adaptive = load(members % ", filter: {window: 3}" + "strategy: adaptive\nadaptive: {warmup_steps: 4}\n")
    r = adaptive.reweight(a=2)
    assert (r.strategy, r.adaptive, r.members["b"].filter) == ("weights", None, None)
    assert r.weights == {"a": 2.0, "b": 1.0, "c": 1.0}  # the starting weights: equal
    # A schedule: the others keep their first phase's weights, the ones of step 1.
    phased = load(
        members % ""
        + "schedule: [{until_step: 5, weights: {a: 1, b: 0, c: 2}}, {weights: {a: 1, b: 1, c: 1}}]\n"
    )
    assert phased.reweight(a=3).weights == {"a": 3.0, "b": 0.0, "c": 2.0}
    # Temperature: its weights follow task counts only the servers know, so every member is given.
    temperature = load(members % "" + "strategy: temperature\ntemperature: 0.5\n")
    with pytest.raises(MixtureConfigError, match="needs every train member's weight.* b, c have no weight"):
        temperature.reweight(a=2)
    assert temperature.reweight(a=2, b=1, c=1).weights == {"a": 2.0, "b": 1.0, "c": 1.0}


def test_prior_pass_rates_are_fractions() -> None:
    prior = """
        members:
          a: {target: "local:echo", filter: {prior: {field: difficulty, pass_rates: %s}}}
        strategy: adaptive
        prompts_per_step: 2
        """
    line = line_with(problems_of(prior % "{Easy: 95, Medium: 50, Hard: 5}"), "pass_rates")
    assert "{Easy: 95, Medium: 50, Hard: 5} are not between 0 and 1" in line
    assert "a pass rate is a fraction: write 0.95, not 95" in line
    assert "pass_rates {Hard: -0.1} is not between 0 and 1" in problems_of(prior % "{Easy: 1, Hard: -0.1}")
    rule = load(prior % "{Easy: 1.0, Medium: 0.5, Hard: 0}").task_filter("a")
    assert rule is not None and rule.prior is not None and rule.prior.pass_rates["Easy"] == 1.0  # type: ignore[union-attr]


@pytest.mark.parametrize("op", ["without", "only", "reweight"])
def test_unknown_names_in_helpers(op: str) -> None:
    cfg = load(THREE)
    call = {
        "without": lambda: cfg.without("zz"),
        "only": lambda: cfg.only("zz", "a"),
        "reweight": lambda: cfg.reweight(zz=1.0),
    }[op]
    with pytest.raises(MixtureConfigError) as info:
        call()
    assert f"{op}() got unknown member(s) 'zz'; known members: a, b, c, held" in str(info.value)


def test_a_misspelt_member_in_a_helper_gets_a_did_you_mean() -> None:
    with pytest.raises(MixtureConfigError, match=r"unknown member\(s\) 'hold'; did you mean 'held'\?"):
        load(THREE).without("hold")


def test_ablation_keeps_secrets_without_the_env() -> None:
    cfg = load(SECRET_FILE + "  other: {target: 'local:echo'}\n")
    derived = cfg.without("other")  # no environ given now: secrets must not be re-expanded
    assert derived.members["seta"].secret_values()["api_key"] == PLANTED


# ---------------------------------------------------------------------------------------------- hash


def test_hash_stable_across_key_order_and_sensitive_to_content() -> None:
    a = load(
        """
        members:
          terminals: {target: "local:terminals", num_tasks: 8}
          seta: {num_tasks: 8, target: "local:seta"}
        seed: 1
        weights: {terminals: 1, seta: 2}
        """
    )
    b = load(
        """
        weights: {seta: 2.0, terminals: 1.0}
        seed: 1
        members:
          terminals: {num_tasks: 8, target: "local:terminals"}
          seta: {target: "local:seta", num_tasks: 8}
        """
    )
    assert a.config_hash() == b.config_hash()
    assert re.fullmatch(r"[0-9a-f]{64}", a.config_hash())
    assert a.config_hash() != a.reweight(seta=3).renamed("mixture").config_hash()
    assert a.config_hash() != load(TWO.replace("num_tasks: 8}", "num_tasks: 9}", 1)).config_hash()
    # Secret values are not part of what is trained on: the hash ignores them.
    s1 = load(SECRET_FILE, environ={"OPENREWARD_API_KEY": "one"})
    s2 = load(SECRET_FILE, environ={"OPENREWARD_API_KEY": "two"})
    assert s1.config_hash() == s2.config_hash()


member_names = st.lists(
    st.from_regex(r"[a-z][a-z0-9]{0,6}", fullmatch=True), min_size=1, max_size=4, unique=True
)


@settings(max_examples=40, deadline=None)
@given(
    member_names,
    st.data(),
)
def test_generated_configs_round_trip_and_hash_ignores_order(names: list[str], data: st.DataObject) -> None:
    members = {
        n: {
            "target": data.draw(st.sampled_from(["local:seta", "Eigent/SETA", "http://h:8", "m.x:Env"])),
            "num_tasks": data.draw(st.none() | st.integers(1, 1000)),
            "scale": data.draw(st.floats(0.01, 10)),
        }
        for n in names
    }
    weights = {n: data.draw(st.floats(0, 5)) for n in names}
    if all(w == 0 for w in weights.values()):
        weights[names[0]] = 1.0
    raw = {"members": members, "weights": weights, "seed": data.draw(st.integers(0, 2**31))}
    cfg = MixtureConfig.from_dict(raw)
    assert MixtureConfig.from_yaml_text(cfg.to_yaml(), resolve_targets=False) == cfg
    shuffled = {k: raw[k] for k in reversed(list(raw))}
    shuffled["members"] = {n: dict(reversed(list(m.items()))) for n, m in members.items()}
    assert MixtureConfig.from_dict(shuffled).config_hash() == cfg.config_hash()


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.sampled_from(["terminals", "seta"]), st.floats(-5, 5), min_size=2))
def test_generated_weights_are_valid_iff_non_negative_and_not_all_zero(weights: dict[str, float]) -> None:
    raw = {
        "members": {"terminals": {"target": "local:terminals"}, "seta": {"target": "local:seta"}},
        "weights": weights,
    }
    valid = all(w >= 0 for w in weights.values()) and any(w > 0 for w in weights.values())
    if valid:
        assert MixtureConfig.from_dict(raw).static_weights() == weights
    else:
        with pytest.raises(MixtureConfigError):
            MixtureConfig.from_dict(raw)


# ---------------------------------------------------------------------------------------------- eval sets


def test_a_files_max_steps_below_one_is_named_with_its_key(tmp_path: Path) -> None:
    from ormix.mixture._mixture import trainer_settings_check

    path = tmp_path / "zero.yaml"
    path.write_text(TWO + "train: {max_steps: 0}\n")
    with pytest.raises(MixtureConfigError) as info:
        load_mixture_config(path, train_check=trainer_settings_check())
    assert "train.max_steps" in str(info.value) and "a run trains at least 1 step, not 0" in str(info.value)


@settings(max_examples=200, deadline=None)
@given(
    trained=st.sets(st.integers(0, 40), max_size=30),
    total=st.integers(0, 40),
    wanted=st.integers(1, 20),
)
def test_held_out_eval_tasks_are_never_trained_on(trained: set[int], total: int, wanted: int) -> None:
    from ormix.config._checks import held_out

    kept = held_out(sorted(trained), range(total), wanted)
    free = [i for i in range(total) if i not in trained]
    if len(free) < wanted:
        assert kept is None  # the caller then says the eval set overlaps training
    else:
        assert kept == free[:wanted] and not set(kept) & trained  # the first untrained tasks, in order
