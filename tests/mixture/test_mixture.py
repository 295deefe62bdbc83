"""MixtureSpec against real local servers: composition, routing, rewards, ablations, manifest, trainer
checks."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from ormix import MixtureSpec, OpenRewardSpec
from ormix._errors import MixtureError
from ormix.mixture import Member
from ormix.rollout._episode import close_episode
from ormix.rollout._routing import RoutingEnvironment
from ormix.server import serve_in_thread
from support.envs import NumericDifficulty, SweSurface
from support.tools import tool_text
from support.trl_args import cpu_grpo_config

T = {"local_serve": "thread"}


def two(**kwargs) -> MixtureSpec:
    members = {
        "terminals": OpenRewardSpec("local:terminals", num_tasks=8, **T),
        "seta": OpenRewardSpec("local:seta", num_tasks=6, **T),
    }
    return MixtureSpec(members, **kwargs)


# ── validation before any I/O ─────────────────────────────────────────────────


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"weights": {"terminals": 1, "sta": 1}}, "unknown member"),
        ({"weights": {"terminals": -1, "seta": 1}}, r"weights.terminals: .* is negative"),
        ({"weights": {"terminals": 0, "seta": 0}}, "every train member's weight in weights is 0"),
        ({"schedule": [{"until_step": None, "weights": {"terminals": 1, "seta": 1}}]}, "prompts_per_step"),
        ({"routing": "magic"}, "routing: must be one of 'auto', 'per_env' or 'namespaced'"),
    ],
)
def test_bad_mixtures_fail_before_contacting_servers(kwargs, message):
    members = {
        "terminals": OpenRewardSpec("http://127.0.0.1:9", env_name="x"),
        "seta": OpenRewardSpec("http://127.0.0.1:9", env_name="y"),
    }
    with pytest.raises(MixtureError, match=message):
        MixtureSpec(members, **kwargs)


@pytest.mark.parametrize(
    "name,message",
    [
        ("Seta", "short identifier"),
        ("seta__x", "contains '__'"),
        ("seta_", "ends with '_'"),
        ("1x", "short identifier"),
        ("a" * 40, "short identifier"),
        ("", "short identifier"),
    ],
)
def test_member_names_are_short_identifiers(name, message):
    # The rule is the config's (one rule for files and Python): the same message either way.
    with pytest.raises(MixtureError, match=message):
        MixtureSpec({name: OpenRewardSpec("http://127.0.0.1:9", env_name="x")})


# ── dataset ───────────────────────────────────────────────────────────────────


def test_exact_per_step_composition_and_metadata():
    mix = two(weights={"terminals": 0.75, "seta": 0.25}, prompts_per_step=4, num_samples=32, seed=3)
    ds = mix.train_dataset
    envs = ds["environment"]
    for step in range(8):
        assert Counter(envs[step * 4 : (step + 1) * 4]) == {"terminals": 3, "seta": 1}
    seta_tasks = [t for e, t in zip(envs, ds["task_index"], strict=True) if e == "seta"]
    assert sorted(seta_tasks[:6]) == list(range(6))  # without replacement inside a cycle
    terminals = mix.spec("terminals").task_specs
    for row in ds.select(range(8)):
        if row["environment"] == "terminals":
            assert row["task_id"] == dict(terminals)[row["task_index"]]["task_id"]
    again = two(weights={"terminals": 0.75, "seta": 0.25}, prompts_per_step=4, num_samples=32, seed=3)
    assert again.train_dataset.to_list() == ds.to_list()
    assert (
        two(
            weights={"terminals": 0.75, "seta": 0.25}, prompts_per_step=4, num_samples=32, seed=4
        ).train_dataset["task_index"]
        != ds["task_index"]
    )


def test_members_sharing_a_target_share_connection_and_tools():
    base = OpenRewardSpec("local:seta", **T)
    mix = MixtureSpec(
        {
            "seta_easy": Member(OpenRewardSpec("local:seta", where={"difficulty": ["Easy"]}, **T)),
            "seta_hard": Member(OpenRewardSpec("local:seta", where={"difficulty": ["Hard"]}, **T)),
        },
        prompts_per_step=2,
        num_samples=8,
    )
    ds = mix.train_dataset
    assert set(ds.filter(lambda r: r["environment"] == "seta_easy")["difficulty"]) == {"Easy"}
    assert set(ds.filter(lambda r: r["environment"] == "seta_hard")["difficulty"]) == {"Hard"}
    easy, hard = mix.spec("seta_easy"), mix.spec("seta_hard")
    # One connection (one client, one local server); each member probes one of its own tasks for task tools.
    assert hard.connection is easy.connection and hard.connection is not base.connection
    assert (
        [t.name for t in hard.tool_specs]
        == [t.name for t in easy.tool_specs]
        == [t.name for t in base.tool_specs]
    )


def test_metadata_type_clash_keeps_arrow_schema_valid():
    with serve_in_thread([SweSurface, NumericDifficulty]) as server:
        mix = MixtureSpec(
            {
                "swe": OpenRewardSpec(server.url, env_name="swesurface", num_tasks=4),
                "num": OpenRewardSpec(server.url, env_name="numericdifficulty", num_tasks=4),
            },
            prompts_per_step=2,
            num_samples=8,
        )
        ds = mix.train_dataset
    rows = ds.to_list()
    swe = next(r for r in rows if r["environment"] == "swe")
    num = next(r for r in rows if r["environment"] == "num")
    # The clashing column is kept as JSON text: both members' values survive exactly.
    assert json.loads(swe["difficulty"]) in ("Easy", "Hard")
    assert isinstance(json.loads(num["difficulty"]), int)
    assert num["tags"] == {"nested": [num["n"]]} and swe["tags"] is None  # no clash: kept as is


# ── routing and rewards ───────────────────────────────────────────────────────


def test_per_env_factory_and_reward_funcs_per_member():
    mix = two(routing="per_env", prompts_per_step=2, num_samples=4)
    factories = mix.environment_factory
    assert set(factories) == {"terminals", "seta"}
    term, seta = factories["terminals"](), factories["seta"]()
    assert "submit" in dir(type(term)) and "submit_solution" not in dir(type(term))
    assert "submit_solution" in dir(type(seta)) and "terminals__bash" not in dir(type(seta))
    funcs = {f.__name__: f for f in mix.reward_funcs}
    assert set(funcs) == {"terminals", "seta"}
    row = next(r for r in mix.train_dataset if r["environment"] == "terminals")
    term.reset(**{k: v for k, v in row.items() if k != "environment"})
    term.submit()
    assert funcs["terminals"](environments=[term]) == [0.0]
    assert funcs["seta"](environments=[term]) == [None]


def test_namespaced_routing_counts_wrong_environment_calls():
    mix = two(routing="namespaced", prompts_per_step=2, num_samples=4)
    env = mix.environment_factory()
    assert isinstance(env, RoutingEnvironment)
    row = next(r for r in mix.train_dataset if r["environment"] == "seta")
    env.reset(**row)
    answer = tool_text(env.terminals__bash, command="ls")
    assert "belongs to environment 'terminals'" in answer
    assert [c.error for c in env.calls] == ["wrong_env"]
    env.seta__ls(path=".")  # its own member's tool: no error (it would raise)
    funcs = {f.__name__: f for f in mix.reward_funcs}
    assert funcs["terminals"](environments=[env]) == [None]
    assert funcs["seta"](environments=[env]) == [None]  # unscored: nothing submitted


def test_single_member_mixture_is_exactly_the_spec():
    spec = OpenRewardSpec("local:echo", num_tasks=3, **T)
    mix = MixtureSpec({"echo": spec})
    factory = mix.environment_factory
    assert callable(factory) and not isinstance(factory, dict)
    env = factory()
    assert "echo" in dir(type(env)) and "echo__echo" not in dir(type(env))
    assert [f.__name__ for f in mix.reward_funcs] == ["echo"]


def test_eval_dataset_per_member_and_eval_only_members():
    mix = MixtureSpec(
        {
            "echo": Member(OpenRewardSpec("local:echo", num_tasks=4, **T), eval_split="test"),
            "held": Member(OpenRewardSpec("local:echo", indices=[10, 11], **T), role="eval"),
        },
        prompts_per_step=2,
        num_samples=4,
    )
    assert set(mix.train_dataset["environment"]) == {"echo"}
    assert set(mix.eval_dataset) == {"echo", "held"}
    assert mix.eval_dataset["echo"]["task_index"] == [0, 1, 2, 3]
    assert (
        mix.eval_dataset["echo"]["word"][0]
        != mix.train_dataset.filter(lambda r: r["task_index"] == 0)["word"][0]
    )  # the test split, not train
    assert mix.eval_dataset["held"]["task_index"] == [10, 11]


def test_eval_num_tasks_on_a_train_member_gives_it_an_eval_set():
    # The bug this guards: `eval: {num_tasks: 2}` on a train member validated, but the member had no eval set.
    from ormix.config import MixtureConfig

    text = """
    name: evals
    members:
      echo: {target: "local:echo", num_tasks: 4, local_serve: thread, eval: {num_tasks: 2}}
      seta: {target: "local:seta", num_tasks: 2, local_serve: thread}
    prompts_per_step: 2
    num_samples: 4
    """
    from_file = MixtureSpec.from_config(MixtureConfig.from_yaml_text(text))
    from_python = MixtureSpec(
        {
            "echo": Member(OpenRewardSpec("local:echo", num_tasks=4, **T), eval_num_tasks=2),
            "seta": OpenRewardSpec("local:seta", num_tasks=2, **T),
        },
        prompts_per_step=2,
        num_samples=4,
        name="evals",
    )
    for mix in (from_file, from_python):
        assert set(mix.eval_dataset) == {"echo"}
        # Held out: the two tasks after the four echo trains on (not its training tasks 0 and 1).
        assert mix.eval_dataset["echo"]["task_index"] == [4, 5]
        assert mix.eval_set("echo").overlap == 0
        assert "ors_split" not in mix.eval_dataset["echo"].column_names  # same split: no override column
    # One model of a mixture: the Python constructor builds the same config as the file.
    assert from_python.config.config_hash() == from_file.config.config_hash()


def test_an_adaptive_mixture_from_python_is_the_same_config_as_from_its_file():
    # Every mixture-file setting is reachable from the constructor: adaptive settings and member filters too.
    from ormix.config import MixtureConfig

    text = """
    name: adapt
    members:
      echo:
        target: "local:echo"
        num_tasks: 4
        local_serve: thread
        filter: {window: 3, solved: 0.9}
      seta: {target: "local:seta", num_tasks: 2, local_serve: thread}
    strategy: adaptive
    adaptive: {floor: 0.2, warmup_steps: 3}
    prompts_per_step: 2
    num_samples: 8
    """
    from_file = MixtureConfig.from_yaml_text(text)
    from_python = MixtureSpec(
        {
            "echo": Member(
                OpenRewardSpec("local:echo", num_tasks=4, **T), filter={"window": 3, "solved": 0.9}
            ),
            "seta": OpenRewardSpec("local:seta", num_tasks=2, **T),
        },
        strategy="adaptive",
        adaptive={"floor": 0.2, "warmup_steps": 3},
        prompts_per_step=2,
        num_samples=8,
        name="adapt",
    ).config
    assert from_python.adaptive.floor == 0.2 and from_python.members["echo"].filter.window == 3
    assert from_python.config_hash() == from_file.config_hash()


# ── ablations and manifest ────────────────────────────────────────────────────


def test_ablations_return_new_specs_and_manifest_hash_is_stable():
    mix = two(weights={"terminals": 0.5, "seta": 0.5}, prompts_per_step=2, num_samples=8)
    assert mix.without("seta").train_members == ["terminals"]
    assert set(mix.only("seta").train_dataset["environment"]) == {"seta"}
    heavy = mix.reweight(seta=1.5)
    assert Counter(heavy.train_dataset["environment"]) == {"seta": 6, "terminals": 2}
    assert mix.config.weights["seta"] == 0.5  # the original is unchanged
    first, second = (
        mix.manifest(),
        two(weights={"terminals": 0.5, "seta": 0.5}, prompts_per_step=2, num_samples=8).manifest(),
    )
    assert first["hash"] == second["hash"]
    assert heavy.manifest()["hash"] != first["hash"]
    assert first["members"]["seta"]["task_indices"] == list(range(6))
    assert "submit_solution" in first["members"]["seta"]["tools"]
    with pytest.raises(MixtureError, match="unknown member"):
        mix.without("nope")


def test_trainer_settings_that_break_the_plan_are_named():

    from ormix.trl._callbacks import check_trainer_args

    mix = two(prompts_per_step=4, num_samples=8)
    args = cpu_grpo_config("/tmp/x", shuffle_dataset=True)
    problems = check_trainer_args(mix, args)
    assert any("shuffle_dataset=False" in p for p in problems)
    assert any("prompts_per_step=4" in p and "2 unique prompts" in p for p in problems)
    ok = cpu_grpo_config("/tmp/x", gradient_accumulation_steps=2)
    assert check_trainer_args(mix, ok) == []


@pytest.mark.parametrize(
    ("settings", "named"),
    [({"num_iterations": 2}, "num_iterations=2"), ({"steps_per_generation": 2}, "steps_per_generation=2")],
)
def test_a_generation_batch_that_is_not_one_optimizer_step_is_refused_when_the_plan_has_steps(
    tmp_path, settings, named
):
    # TRL generates once every steps_per_generation x num_iterations micro-steps: with either changed, a
    # planned step's rows train another number of optimizer steps than one, and quotas, schedule and the
    # records' steps would say other than what trained.
    from ormix._errors import TrainConfigError
    from ormix.trl._args import build_grpo_config
    from ormix.trl._callbacks import check_trainer_args

    planned = two(prompts_per_step=2, num_samples=8)
    args = cpu_grpo_config(str(tmp_path), **settings)  # 2 prompts a step, as planned
    assert [p for p in check_trainer_args(planned, args) if named in p]
    with pytest.raises(TrainConfigError, match=named):
        build_grpo_config(planned, {"num_generations": 2, **settings}, output_dir=tmp_path)
    unplanned = two()  # weights alone: no step carries a quota, nothing to keep
    assert not [p for p in check_trainer_args(unplanned, args) if named in p]
    build_grpo_config(unplanned, {"num_generations": 2, **settings}, output_dir=tmp_path)


# ── regressions found in review ───────────────────────────────────────────────


def test_eval_rows_of_another_split_open_sessions_in_that_split():
    mix = MixtureSpec(
        {"echo": Member(OpenRewardSpec("local:echo", num_tasks=2, **T), role="both", eval_split="test")},
        prompts_per_step=2,
        num_samples=2,
    )
    rows = mix.eval_dataset["echo"].to_list()
    assert len(rows) == 4  # the whole test split, not the training selection's 2
    env = mix.environment_factory()
    for row in rows:
        prompt = env.reset(**row)
        assert f"word '{row['word']}'" in prompt  # the test split's task, not train's task of that index
        env.submit(text=row["word"])
        assert env.reward == 1.0
    close_episode(env)


def test_ablations_keep_the_files_train_section_and_reweight_switches_to_weights():
    from pathlib import Path

    from ormix.mixture import load_mixture

    root = Path(__file__).resolve().parents[2]
    mix = load_mixture(str(root / "mixtures/local-demo.yaml"))
    assert mix.without("seta").config.train == mix.config.train
    rr = two(strategy="round_robin", num_samples=20)
    heavy = rr.reweight(terminals=0.95, seta=0.05)
    assert heavy.strategy == "weights"
    assert Counter(heavy.train_dataset["environment"])["terminals"] > 15
    schedule = [
        {"until_step": 2, "weights": {"terminals": 1, "seta": 0}},
        {"until_step": None, "weights": {"terminals": 0, "seta": 1}},
    ]
    curriculum = two(schedule=schedule, prompts_per_step=2, num_samples=8)
    assert set(curriculum.only("seta").train_dataset["environment"]) == {"seta"}
    with pytest.raises(MixtureError, match="has role: eval and is never trained on"):
        MixtureSpec(
            {
                "a": OpenRewardSpec("local:echo", num_tasks=2, **T),
                "b": Member(OpenRewardSpec("local:echo", num_tasks=2, **T), role="eval"),
            }
        ).reweight(b=1.0)


def test_a_run_longer_than_the_plan_is_refused():

    from ormix.trl._callbacks import check_trainer_args

    mix = two(prompts_per_step=2, num_samples=8)
    args = cpu_grpo_config("/tmp/x", max_steps=10)
    problems = check_trainer_args(mix, args)
    assert any("num_samples >= 20" in p for p in problems), problems
    args = cpu_grpo_config("/tmp/x", max_steps=4)
    assert check_trainer_args(mix, args) == []


# ── eval sets, as the servers answer ──────────────────────────────────────────


def test_eval_sets_say_which_tasks_why_and_how_many_are_trained_on():
    # local:echo has 16 train tasks and 4 test tasks.
    mix = MixtureSpec(
        {
            "held": Member(OpenRewardSpec("local:echo", num_tasks=4, **T), eval_num_tasks=3),
            "crowded": Member(OpenRewardSpec("local:echo", num_tasks=15, **T), eval_num_tasks=2),
            "other": Member(
                OpenRewardSpec("local:echo", num_tasks=2, **T), eval_split="test", eval_num_tasks=9
            ),
            "picked": Member(OpenRewardSpec("local:echo", indices=[3, 4], **T), eval_indices=[4, 5]),
            "both": Member(OpenRewardSpec("local:echo", indices=[7], **T), role="both"),
        },
        prompts_per_step=2,
        num_samples=4,
    )
    sets = mix.eval_sets()
    assert sets["held"].task_indices == (4, 5, 6) and sets["held"].overlap == 0 and not sets["held"].notes
    # 15 of 16 tasks trained on: 2 cannot be held out, and the eval set says it overlaps training.
    crowded = sets["crowded"]
    assert crowded.task_indices == (0, 1) and crowded.overlap == 2
    assert crowded.notes[0].startswith("crowded: eval overlaps training: split 'train' has 16 tasks")
    assert sets["other"].split == "test" and sets["other"].task_indices == (0, 1, 2, 3)
    assert sets["other"].notes == ("other: eval asks for 9 tasks; split 'test' has 4",)
    assert (
        sets["picked"].overlap == 1 and "1 of its 2 eval tasks are training tasks" in sets["picked"].notes[0]
    )
    assert sets["both"].task_indices == (7,) and sets["both"].overlap == 1
    assert mix.eval_dataset["held"]["task_index"] == [4, 5, 6]  # what evaluation runs on
    assert crowded.as_dict()["overlap"] == 2  # what the run manifest's `eval` keeps


@pytest.mark.parametrize(
    ("member", "message"),
    [
        (
            Member(OpenRewardSpec("local:echo", num_tasks=2, **T), eval_split="validation"),
            r"member 'echo': eval split 'validation' does not exist on local:echo \(its splits: train, test",
        ),
        (
            Member(OpenRewardSpec("local:echo", num_tasks=2, **T), eval_split="test", eval_indices=[1, 9]),
            r"member 'echo': eval index\(es\) \[9\] do not exist: split 'test' has 4 tasks \(0-3\)",
        ),
    ],
)
def test_an_eval_set_the_environment_does_not_have_is_named_with_its_member(member, message):
    mix = MixtureSpec({"echo": member}, prompts_per_step=2, num_samples=2)
    with pytest.raises(MixtureError, match=message):
        mix.eval_set("echo")
    with pytest.raises(MixtureError, match=message):
        _ = mix.eval_dataset


def test_one_selection_chooses_every_members_eval_tasks_for_eval_check_and_train():
    from ormix.evaluation import eval_tasks
    from ormix.evaluation._tasks import default_eval_set

    # local:echo has a test split, the SWE surface none: a member without eval: falls back accordingly.
    with serve_in_thread([SweSurface]) as server:
        mix = MixtureSpec(
            {
                "echo": OpenRewardSpec("local:echo", num_tasks=2, **T),
                "swe": OpenRewardSpec(server.url, env_name="swesurface", num_tasks=2),
                "held": Member(OpenRewardSpec("local:echo", num_tasks=4, **T), eval_num_tasks=2),
            },
            prompts_per_step=3,
            num_samples=3,
        )
        found = {m: mix.eval_selection(m) for m in mix.members}
        tasks = eval_tasks(mix)
        defaults = {m: default_eval_set(mix, m) for m in mix.members}  # what `ormix check`/`inspect` show
        on_test = mix.eval_selection("held", split="test")  # `ormix eval --split test`
        held_on_test = eval_tasks(mix, members=["held"], split="test")["held"]
        mix.close()
    assert {m: f.kind for m, f in found.items()} == {
        "echo": "test split",
        "swe": "train tasks",
        "held": "eval set",
    }
    assert found["held"] == mix.eval_set("held")  # the member's eval: set is the selection's
    assert found["swe"].overlap == 2 and "evaluated on the tasks it trains on" in found["swe"].notes[0]
    assert defaults == found
    for member, chosen in found.items():
        assert (tasks[member].split, tasks[member].indices, tasks[member].source) == (
            chosen.split,
            chosen.task_indices,
            chosen.kind,
        )
    # The eval: set's num_tasks still applies on the split --split names.
    assert (on_test.kind, on_test.task_indices, held_on_test.indices) == (
        "split test (--split)",
        (0, 1),
        (0, 1),
    )


def test_a_member_is_its_member_config_and_names_options_it_does_not_have():
    from ormix.config import MixtureConfigError

    member = Member(OpenRewardSpec("local:echo", num_tasks=4, **T), weight=2.0, eval_split="test")
    assert member.config.weight == 2.0 and member.config.eval.split == "test"
    assert member.config.num_tasks == 4  # the spec's options are the member's
    with pytest.raises(MixtureConfigError, match=r"wieght: not a member option; use one of: eval, filter"):
        Member(OpenRewardSpec("local:echo"), wieght=2.0)
    with pytest.raises(MixtureConfigError, match=r"scale: must be greater than 0"):
        Member(OpenRewardSpec("local:echo"), scale=0)
    with pytest.raises(MixtureConfigError, match=r"eval: give eval= or eval_split"):
        Member(OpenRewardSpec("local:echo"), eval={"split": "test"}, eval_num_tasks=2)


def test_a_member_made_eval_only_keeps_its_held_out_eval_tasks():
    # An ablation arm that drops a member keeps it as role: eval: its eval set must be the full mixture's.
    def mixture(role):
        member = Member(OpenRewardSpec("local:echo", num_tasks=4, **T), role=role, eval_num_tasks=2)
        return MixtureSpec({"kept": OpenRewardSpec("local:echo", indices=[9], **T), "dropped": member})

    full, arm = mixture("train").eval_set("dropped"), mixture("eval").eval_set("dropped")
    assert full.task_indices == arm.task_indices == (4, 5)
    assert (full.overlap, arm.overlap) == (0, 0) and arm.source.endswith("does not select (role: eval)")


def _local_server_children() -> set[int]:
    """Local-server child processes of this process (their command line runs `ormix.server`)."""
    import os
    from pathlib import Path

    found = set()
    for proc in Path("/proc").iterdir():
        try:
            if not proc.name.isdigit() or int((proc / "stat").read_text().split()[3]) != os.getpid():
                continue
            if b"ormix.server" in (proc / "cmdline").read_bytes():
                found.add(int(proc.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


def test_connect_starts_every_members_local_server_before_anything_asks_for_one():
    # Process mode, as `ormix train` serves; targets no other test serves in process mode, so no server
    # of an earlier test in this worker is found running: connect() is what starts the children.
    from ormix.server._shared import server_for

    targets = ("support.envs:SetaSurface", "support.envs:NumericDifficulty")
    before = _local_server_children()
    mix = MixtureSpec(
        {
            "a": OpenRewardSpec(targets[0], num_tasks=1, local_serve="process"),
            "b": OpenRewardSpec(targets[1], num_tasks=1, local_serve="process"),
            "c": OpenRewardSpec(targets[0], indices=[1], local_serve="process"),  # a's server
        }
    )
    try:
        assert _local_server_children() == before  # constructing contacts no server
        mix.connect()
        assert len(_local_server_children() - before) == 2
        mix.connect()  # again: nothing new
        assert len(_local_server_children() - before) == 2
    finally:
        mix.close()
        for target in targets:
            server_for(target, mode="process").close()


def test_concurrent_first_uses_of_a_connection_make_one_client():
    # connect() ahead of an episode's first open: both ask while the local server starts.
    import anyio

    from ormix._connection import Connection
    from ormix.config import SpecConfig
    from ormix.ors import run_sync

    connection = Connection(SpecConfig(target="local:terminals", local_serve="thread"))
    got = []

    async def first_use() -> None:
        got.append(await connection.client())

    async def both() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(first_use)
            tg.start_soon(first_use)

    try:
        run_sync(both)
        assert len(got) == 2 and got[0] is got[1]
    finally:
        connection.close()
