"""`ormix show`: rollouts of a real (tiny, scripted) `ormix.app._train` run and of its eval directory as
text."""

from __future__ import annotations

import io
import json
import os
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from typer.testing import CliRunner

from ormix._errors import UsageError
from ormix.app import app
from ormix.app._show import (
    ShownRollout,
    format_call,
    known_secrets,
    load_rollouts,
    outcome_line,
    redact,
    render_rollout,
    select_rollouts,
    show_command,
)

#: What the scripted policy passes to the echo tool, which says it back: it lands in the tool call's
#: arguments and in the tool's result, in TRL's completion log, unredacted.
SECRET = "tok-s3cr3t-4711"
SECRET_VAR = "ORMIX_SHOW_TEST_TOKEN"


def _word_then_submit(ctx):
    """Echo tasks: echo the secret, then submit the word (the group's first rollout) or a miss; seta: stop."""
    from ormix.workbench._scripted import tool_call

    found = re.search(r"word '(\w+)'", ctx.user)
    if found is None:
        return "done"
    if ctx.turn == 0:
        return tool_call("echo", text=f"say {SECRET}")
    if ctx.turn == 1:
        return tool_call("submit", text=found.group(1) if ctx.sample == 0 else "miss")
    return "done"


@pytest.fixture(scope="module")
def run(tiny_model, tmp_path_factory):
    """Two GRPO steps of `ormix.app._train` on echo (with a held-out eval set and a secret) and seta (whose
    rollouts end unscored), scripted; then the eval after training, on the same trainer."""
    from transformers import TrainerCallback

    from ormix import MixtureSpec, OpenRewardSpec
    from ormix.app._train import train
    from ormix.mixture import Member
    from ormix.workbench._scripted import ScriptedPolicy

    class Scripted(TrainerCallback):
        def on_init_end(self, args, state, control, model=None, processing_class=None, **kwargs):
            ScriptedPolicy(_word_then_submit, tokenizer=processing_class).attach(model)

    echo = OpenRewardSpec("local:echo", num_tasks=2, local_serve="thread", secrets={SECRET_VAR: SECRET})
    mix = MixtureSpec(
        {
            "echo": Member(echo, eval_num_tasks=2),
            "seta": OpenRewardSpec("local:seta", num_tasks=1, local_serve="thread"),
        },
        prompts_per_step=2,
        num_samples=4,
        name="show-demo",
    )
    out = tmp_path_factory.mktemp("show") / "run"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
        settings = {"num_generations": 2, "max_completion_length": 256, "max_tool_calling_iterations": 3}
        train(
            mix,
            max_steps=2,
            output_dir=out,
            warmup_sft=0,
            settings=settings,
            console=Console(file=io.StringIO()),
            callbacks=[Scripted()],
        )
    return out


def _show(path, **options) -> str:
    console = Console(file=io.StringIO(), width=200, color_system=None)
    assert show_command(path, console, **options) == 0
    return console.file.getvalue()


@pytest.mark.slow
def test_a_training_step_is_shown_with_prompt_turns_tool_calls_results_reward_and_outcome(run, monkeypatch):
    monkeypatch.setenv(SECRET_VAR, SECRET)
    text = _show(run, step=1, member="echo")
    blocks = text.split("\n\n")
    assert len(blocks) == 3 and blocks[0].startswith("── step 1 · echo · task ")  # two rollouts, a footer
    first = blocks[0]
    assert "[user]\n    Call the echo tool with the word '" in first  # the prompt
    assert '→ echo(text="say [redacted]")' in first  # a tool call with its arguments
    assert "[tool echo]" in first and "\n    say [redacted]" in first  # the tool's result
    word = re.search(r"word '(\w+)'", first).group(1)
    assert f'→ submit(text="{word}")' in first and f"submitted '{word}'" in first
    assert "[tool submit]" in first and "reward 1.0 · finished" in first  # from the record
    assert "outcome: scored · reward 1.0 · advantage +" in first
    assert '→ submit(text="miss")' in blocks[1] and "outcome: scored · reward 0.0 · advantage -" in blocks[1]
    assert blocks[2].startswith("2 of 2 rollout(s) shown (2 scored) · step 1")


@pytest.mark.slow
def test_secrets_are_redacted_from_what_the_completion_log_holds_in_clear(run, monkeypatch):
    import pyarrow.parquet as pq

    raw = json.dumps(pq.read_table(run / "completions" / "completions_00001.parquet").to_pylist())
    assert SECRET in raw  # TRL logs it as is: without redaction `show` would print it
    monkeypatch.setenv(SECRET_VAR, SECRET)
    text = _show(run, step=1, limit=0)
    assert SECRET not in text and text.count("[redacted]") == 4  # two rollouts: call and result each
    # The variable unset where `show` runs: its value is unknown, so `--secret-env` cannot help either;
    # the manifest names the variable, which is what lets `show` find the value.
    manifest = json.loads((run / "manifest.json").read_text())
    assert manifest["members"]["echo"]["secret_names"] == [SECRET_VAR]


@pytest.mark.slow
def test_unscored_rollouts_say_why_and_filters_narrow_the_output(run):
    text = _show(run, step=1, outcome="unscored")
    assert "· seta · task 0" in text and "· echo ·" not in text
    assert "outcome: unscored (the episode did not finish: no call ended it) · no reward" in text
    assert "[assistant]\n    done" in text  # seta's text is shown too
    one = _show(run, step=1, limit=1)
    assert one.count("── step 1") == 1 and "1 of 4 rollout(s) shown" in one and "--limit 0 shows all" in one
    task = next(r.record["task_index"] for r in load_rollouts(run)[0] if r.record["member"] == "echo")
    by_task = _show(run, member="echo", task=task, limit=0)
    assert by_task.count("── step") >= 2 and all(
        f"task {task} " in line for line in by_task.splitlines() if line.startswith("── ")
    )


@pytest.mark.slow
def test_the_latest_step_is_the_default_and_an_eval_after_it_leaves_its_text_alone(run):
    # `ormix train`'s eval after training runs on the same trainer; TRL would write its completions as
    # completions_00002.parquet, over step 2's. The trainer keeps the step's: its text is the step's tasks'.
    text = _show(run, member="echo", limit=0)
    assert text.count("── step 2 · echo") == 2 and "no text" not in text
    assert "step 2 (the latest that matches; steps 1-2: --step N for another)" in text
    trained = set(re.findall(r"word '(\w+)'", text))
    evaluated = set(re.findall(r"word '(\w+)'", _show(run / "eval", member="echo", limit=0)))
    assert len(trained) == 1 and len(evaluated) == 2 and not trained & evaluated  # held-out tasks


@pytest.mark.slow
def test_an_eval_directory_is_shown_with_its_text_from_its_records(run, monkeypatch):
    assert SECRET not in (run / "eval" / "rollouts.jsonl").read_text()  # redacted as it is written
    monkeypatch.delenv(SECRET_VAR, raising=False)
    direct = _show(run / "eval", member="echo", limit=0)
    assert direct == _show(run, eval_name="after", member="echo", limit=0)
    blocks = direct.split("\n\n")
    headings = [b.splitlines()[0] for b in blocks[:-1]]
    # echo's held-out eval set: tasks 2 and 3, 4 samples each
    assert len(headings) == 8 and {h.split(" · ")[1] for h in headings} == {
        "task 2 (train)",
        "task 3 (train)",
    }
    first = blocks[0]
    assert "[user]\n    Call the echo tool with the word '" in first
    assert (
        '→ echo(text="say [redacted]")' in first
        and "[tool echo]" in first
        and "\n    say [redacted]" in first
    )
    assert "[tool submit]" in first and "reward 1.0 · finished" in first
    assert "outcome: scored · reward 1.0" in first and "no text" not in direct
    assert "8 of 8 rollout(s) shown (8 scored)" in direct and "step" not in direct
    everything = _show(run / "eval", limit=0)
    assert "── seta · task" in everything  # every member of the eval, unless --member narrows it


@pytest.mark.slow
def test_the_command_line_shows_and_refuses_what_is_not_there_with_exit_2(run, tmp_path):
    runner = CliRunner()
    ok = runner.invoke(app, ["show", str(run), "--step", "1", "--member", "seta"], terminal_width=200)
    assert ok.exit_code == 0 and "── step 1 · seta · task 0" in ok.output, ok.output
    for argv, message in [
        (["--step", "7"], "error: step 7 is not in"),
        (["--member", "ecoh"], "error: no member 'ecoh' in"),
        (["--outcome", "crashed"], "error: --outcome 'crashed' is not an outcome"),
        (["--eval", "befor"], "error: no eval 'befor' in"),
        (["--mode", "eval"], "holds no eval rollouts (it holds: train)"),
    ]:
        result = runner.invoke(app, ["show", str(run), *argv], terminal_width=300)
        assert result.exit_code == 2, (argv, result.output)
        assert message in result.output.replace("\n", ""), (argv, result.output)
    assert (
        "(its steps: 1-2)" in runner.invoke(app, ["show", str(run), "--step", "7"], terminal_width=300).output
    )
    member = runner.invoke(app, ["show", str(run), "--member", "ecoh"], terminal_width=300).output
    assert "(members: echo, seta); did you mean 'echo'?" in member.replace("\n", "")
    empty = runner.invoke(app, ["show", str(tmp_path)], terminal_width=300)
    assert empty.exit_code == 2 and "holds no rollout records" in empty.output


def test_records_that_carry_their_own_text_are_shown_with_it_redacted(tmp_path, monkeypatch):
    from ormix.app._eval_dir import EvalDirectory

    monkeypatch.setenv("OPENREWARD_API_KEY", "or-key-0123456789")
    record = {
        "mode": "eval",
        "member": "echo",
        "task_index": 1,
        "outcome": "scored",
        "reward": 1.0,
        "calls": [{"tool": "submit", "latency_ms": 2.0, "reward": 1.0, "finished": True}],
        "prompt": [{"role": "user", "content": "Say 'pear'."}],
        "completion": [
            {
                "role": "assistant",
                "content": "key or-key-0123456789",
                "tool_calls": [
                    {"type": "function", "function": {"name": "submit", "arguments": '{"text": "pear"}'}}
                ],
            },
            {"role": "tool", "name": "submit", "content": "correct"},
        ],
    }
    EvalDirectory(tmp_path).append([record], seq=0)
    text = _show(tmp_path)
    assert "[user]\n    Say 'pear'.\n[assistant]\n    key [redacted]\n    → submit(text=\"pear\")" in text
    assert "[tool submit] 2 ms · reward 1.0 · finished\n    correct\noutcome: scored · reward 1.0" in text
    assert "or-key-0123456789" not in text and "no text" not in text


def test_a_directory_that_is_not_there_is_refused(tmp_path):
    with pytest.raises(UsageError, match="is not a directory"):
        load_rollouts(tmp_path / "missing")


# ── pure logic ────────────────────────────────────────────────────────


def test_an_error_says_its_kind_and_reason_and_a_record_without_text_lists_its_calls():
    record = {
        "step": 4,
        "member": "terminals",
        "task_index": 7,
        "split": "test",
        "outcome": "error",
        "error_kind": "tool_timeout",
        "error": "bash took longer than 300 s",
        "reward": None,
        "calls": [{"tool": "bash", "latency_ms": 300000.0, "error": "timeout", "detail": "sleep 999"}],
    }
    text = render_rollout(ShownRollout(record, no_text="not logged"))
    assert text.splitlines() == [
        "── step 4 · terminals · task 7 (test) ──",
        "(no text: not logged)",
        "calls: bash (300000 ms · error timeout)",
        "    bash: sleep 999",
        "outcome: error (tool_timeout: bash took longer than 300 s) · no reward (left out of GRPO)",
    ]
    assert outcome_line({"outcome": "unscored", "reward": 0.0, "finished": True}) == (
        "outcome: unscored (the episode finished without a reward) · reward 0.0 (unscored_reward)"
    )


def test_long_messages_are_cut_and_say_how_much_is_left():
    completion = [{"role": "assistant", "content": "x" * 50}]
    text = render_rollout(ShownRollout({"member": "a", "task_index": 0}, completion=completion), max_chars=10)
    assert "    xxxxxxxxxx… (40 more characters)" in text
    assert "x" * 50 in render_rollout(ShownRollout({"member": "a"}, completion=completion), max_chars=0)


def test_secrets_come_from_the_variables_the_run_names_and_token_shapes_are_redacted_anyway():
    manifest = {
        "members": {"a": {"secret_names": ["A_TOKEN"]}},
        "config": {"members": {"a": {"secrets": ["A_TOKEN"], "api_key_env": "A_KEY"}}},
    }
    env = {"A_TOKEN": "token-aaaa", "A_KEY": "key-bbbbbbbb", "OPENREWARD_API_KEY": "or-cccc", "HOME": "/root"}
    assert known_secrets([manifest, None], env, extra_env=["HOME"]) == (
        "key-bbbbbbbb",
        "token-aaaa",
        "or-cccc",
        "/root",
    )
    assert (
        redact("use sk-abcdefghijklmnop1234 and hf_ABCDEFGHIJKLMNOPQRSTUV") == "use [redacted] and [redacted]"
    )
    record = {"member": "a", "error": "auth failed for key-bbbbbbbb", "outcome": "error", "calls": []}
    assert "key-bbbbbbbb" not in render_rollout(ShownRollout(record), known_secrets([manifest], env))


# A secret holds a character the rendering never writes itself (so the fixed words of the text cannot spell
# it) and none of the punctuation a call is written with; anything else goes, quotes' escapes included.
_part = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters='"(),= []'), max_size=6)
secret_text = st.tuples(_part, st.sampled_from("#%&*@^~|"), _part).map("".join).filter(lambda s: len(s) >= 4)
json_leaf = st.one_of(st.integers(), st.booleans(), st.text(max_size=8))


@given(
    secret=secret_text,
    before=st.text(max_size=6),
    after=st.text(max_size=6),
    other=st.dictionaries(st.from_regex(r"[a-z]{1,6}", fullmatch=True), json_leaf, max_size=3),
)
def test_no_secret_survives_redaction_and_formatting_even_quoted(secret, before, after, other):
    # Arguments are redacted before they are quoted: a secret that JSON escapes (a backslash, a newline)
    # must not come back in its escaped form either.
    args = {**other, "value": before + secret + after, "nested": [{"deep": secret}]}
    shown = format_call("tool", redact(args, [secret]))
    escaped = json.dumps(secret, ensure_ascii=False)[1:-1]
    assert secret not in shown and escaped not in shown
    text = render_rollout(
        ShownRollout(
            {"member": "m", "error": secret, "outcome": "error", "calls": [{"tool": "t", "detail": secret}]},
            prompt=[{"role": "user", "content": secret}],
            completion=[
                {
                    "role": "assistant",
                    "content": secret,
                    "tool_calls": [{"function": {"name": "t", "arguments": args}}],
                },
                {"role": "tool", "name": "t", "content": before + secret},
            ],
        ),
        [secret],
    )
    assert secret not in text and escaped not in text


@given(
    st.dictionaries(
        st.from_regex(r"[a-z_]{1,8}", fullmatch=True),
        st.recursive(json_leaf, lambda inner: st.lists(inner, max_size=3), max_leaves=5),
        max_size=4,
    )
)
def test_a_call_reads_the_same_from_a_dict_and_from_its_json(args):
    shown = format_call("f", args)
    assert shown == format_call("f", json.dumps(args))
    assert shown.startswith("f(") and shown.endswith(")")
    assert all(f"{k}={json.dumps(v, ensure_ascii=False)}" in shown for k, v in args.items())


records = st.lists(
    st.fixed_dictionaries(
        {
            "step": st.integers(1, 4),
            "member": st.sampled_from(["echo", "seta", "terminals"]),
            "outcome": st.sampled_from(["scored", "unscored", "error"]),
            "task_index": st.integers(0, 3),
        }
    ),
    min_size=1,
    max_size=30,
)


@given(
    records,
    st.one_of(st.none(), st.sampled_from(["echo", "seta", "terminals"])),
    st.one_of(st.none(), st.sampled_from(["scored", "unscored", "error"])),
)
def test_selection_keeps_exactly_the_matching_rollouts_of_the_latest_matching_step(rows, member, outcome):
    rollouts = [ShownRollout(r) for r in rows]
    if member is not None and member not in {r["member"] for r in rows}:
        with pytest.raises(UsageError, match="no member"):
            select_rollouts(rollouts, member=member)
        return
    chosen, step = select_rollouts(rollouts, member=member, outcome=outcome)
    matching = [
        r
        for r in rows
        if (member is None or r["member"] == member) and (outcome is None or r["outcome"] == outcome)
    ]
    if not matching:
        assert chosen == [] and step is None
        return
    assert step == max(r["step"] for r in matching)
    assert [c.record for c in chosen] == [r for r in matching if r["step"] == step]


@given(st.sets(st.integers(0, 40), min_size=1))
def test_a_step_not_in_the_run_is_refused_naming_the_steps_there_as_ranges(steps):
    rollouts = [ShownRollout({"step": s, "member": "a"}) for s in steps]
    with pytest.raises(UsageError) as failure:
        select_rollouts(rollouts, step=41)
    listed = re.search(r"its steps: ([\d, -]+)\)", str(failure.value)).group(1)
    back = set()
    for part in listed.split(", "):
        low, _, high = part.partition("-")
        back |= set(range(int(low), int(high or low) + 1))
    assert back == steps


def test_show_needs_no_torch_to_import():
    import subprocess
    import sys

    code = "import sys, ormix.app._show; print('torch' in sys.modules or 'trl' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=os.environ
    )
    assert done.stdout.strip() == "False", done.stderr


def test_a_secret_read_from_a_variable_of_another_name_is_redacted(tmp_path, monkeypatch):
    # The usual form: the key the environment sees (`token`) is not the variable holding its value.
    from ormix.app._eval_dir import EvalDirectory
    from ormix.config import MixtureConfig

    monkeypatch.setenv("ORMIX_SHOW_GH_TOKEN", "gh-s3cr3t-0987")
    config = MixtureConfig.from_yaml_text(
        'members:\n  echo: {target: "local:echo", num_tasks: 2, secrets: {token: "${ORMIX_SHOW_GH_TOKEN}"}}\n'
    )
    manifest = {"config": config.manifest_dict(), "secret_env": config.secret_sources()}
    assert "gh-s3cr3t-0987" not in json.dumps(manifest)  # names only, never values
    assert manifest["secret_env"] == {"echo": ["ORMIX_SHOW_GH_TOKEN"]}
    renamed = MixtureConfig.from_yaml_text(
        'members:\n  echo: {target: "local:echo", num_tasks: 2, secrets: {token: "${OTHER_VAR}"}}\n',
        environ={"OTHER_VAR": "x"},
    )
    # Kept beside the config, not in it: the hash (and what a resume compares) is where it was.
    assert config.config_hash() == renamed.config_hash() and config.manifest_dict() == renamed.manifest_dict()
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    record = {
        "mode": "eval",
        "member": "echo",
        "task_index": 0,
        "outcome": "scored",
        "reward": 1.0,
        "calls": [],
        "prompt": [{"role": "user", "content": "hi"}],
        "completion": [{"role": "tool", "name": "echo", "content": "env says token=gh-s3cr3t-0987"}],
    }
    EvalDirectory(tmp_path).append([record], seq=0)
    text = _show(tmp_path)
    assert "gh-s3cr3t-0987" not in text and "token=[redacted]" in text


def _eval_record(member: str = "echo", word: str = "pear") -> dict:
    return {
        "mode": "eval",
        "member": member,
        "task_index": 0,
        "outcome": "scored",
        "reward": 1.0,
        "calls": [],
        "prompt": [{"role": "user", "content": f"Say '{word}'."}],
        "completion": [{"role": "assistant", "content": word}],
    }


def test_a_message_about_an_eval_names_the_directory_read(tmp_path):
    from ormix.app._eval_dir import EvalDirectory

    EvalDirectory(tmp_path / "eval").append([_eval_record()], seq=0)
    result = CliRunner().invoke(
        app, ["show", str(tmp_path), "--eval", "after", "--member", "nope"], terminal_width=400
    )
    assert result.exit_code == 2, result.output
    assert f"no member 'nope' in {tmp_path / 'eval'} " in result.output, result.output


def test_the_eval_of_a_checkpoint_is_one_of_the_runs_evals(tmp_path):
    # Where `ormix eval --model RUN/checkpoint-N` writes (`ormix.app._eval_model`).
    from ormix.app._eval_dir import EvalDirectory

    EvalDirectory(tmp_path / "eval").append([_eval_record(word="pear")], seq=0)
    EvalDirectory(tmp_path / "eval" / "checkpoint-2").append([_eval_record(word="plum")], seq=0)
    text = _show(tmp_path, eval_name="checkpoint-2")
    assert "Say 'plum'." in text and "pear" not in text
    assert "Say 'pear'." in _show(tmp_path, eval_name="after")
    result = CliRunner().invoke(app, ["show", str(tmp_path), "--eval", "nope"], terminal_width=400)
    assert result.exit_code == 2 and "(its eval directories: eval, eval/checkpoint-2)" in result.output


@pytest.mark.slow
def test_a_half_written_run_shows_its_last_completed_step_unless_asked_for_the_unfinished_one(run, tmp_path):
    import shutil

    # The run stopped during step 2: its records were written, its progress and completions were not.
    half = tmp_path / "half"
    shutil.copytree(run, half)
    (half / "progress.json").write_text('{"completed_step": 1}\n')
    (half / "completions" / "completions_00002.parquet").unlink()
    text = _show(half, member="echo", limit=0)
    assert text.count("── step 1 · echo") == 2 and "── step 2" not in text and "no text" not in text
    assert "step 1 (the latest completed that matches; steps 1-2: --step N for another)" in text
    unfinished = _show(half, step=2, member="echo", limit=0)
    assert "· step 2 (not completed)" in unfinished and "log_completions" not in unfinished
    assert "step 2 did not complete" in unfinished


@pytest.mark.slow
def test_only_the_completion_logs_of_the_steps_shown_are_read(run, monkeypatch):
    from ormix.app import _show as show_module

    read = []
    real = show_module._completion_rows
    monkeypatch.setattr(show_module, "_completion_rows", lambda path: read.append(path.name) or real(path))
    text = _show(run, step=1, limit=1)
    assert read == ["completions_00001.parquet"]  # a long run's other steps are never opened
    assert text.count("── step 1 ·") == 1 and "no text" not in text and "[user]" in text
    assert "1 of 4 rollout(s) shown" in text


def test_a_run_that_completed_no_step_shows_its_latest_step_without_calling_it_completed(tmp_path):
    from ormix.telemetry._records import TelemetryRun

    # The run stopped in its first steps: records of steps 1 and 2, none of them completed.
    records = [
        {"step": s, "mode": "train", "member": "echo", "task_index": 0, "outcome": "unscored", "calls": []}
        for s in (1, 2)
    ]
    TelemetryRun(tmp_path).write(records)
    (tmp_path / "progress.json").write_text('{"completed_step": 0}\n')
    text = " ".join(_show(tmp_path).split())
    assert "· step 2 (not completed) (the latest that matches; steps 1-2: --step N for another)" in text
    assert "latest completed" not in text
