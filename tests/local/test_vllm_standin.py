"""The vLLM stand-in (`ormix.workbench._vllm_standin`) over real loopback HTTP, with the tiny model: what it
does with the sampling parameters TRL's async rollout worker sends, and how scripts see a group's samples.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

#: What TRL 1.16's `_AsyncRolloutLoop._generate_one_turn` sends with `AsyncGRPOConfig`'s defaults.
TRL_DEFAULTS = {
    "model": "tiny",
    "max_tokens": 6,
    "temperature": 1.0,
    "top_p": 1.0,
    "top_k": 0,
    "repetition_penalty": 1.0,
    "n": 1,
    "return_token_ids": True,
    "logprobs": 0,
}
PROMPT = [11, 12, 13, 14]


def post(url: str, body: dict) -> tuple[int, dict]:
    req = urllib.request.Request(
        url + "/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_temperature_zero_is_greedy(tiny_model):
    import torch

    from ormix.workbench._vllm_standin import VLLMStandIn

    with VLLMStandIn(tiny_model) as standin:
        body = {**TRL_DEFAULTS, "prompt": PROMPT, "temperature": 0.0}
        outs = [post(standin.url, {**body, "seed": seed})[1]["choices"][0]["token_ids"] for seed in (1, 2)]
        with torch.no_grad():
            logits = standin.model(torch.tensor([PROMPT + outs[0]])).logits[0, len(PROMPT) - 1 : -1]
    assert outs[0] == outs[1]  # the seed does not matter
    assert outs[0] == logits.argmax(-1).tolist()


def test_defaults_are_served_and_what_is_not_implemented_is_refused(tiny_model):
    from ormix.workbench._vllm_standin import VLLMStandIn

    with VLLMStandIn(tiny_model) as standin:
        status, _ = post(standin.url, {**TRL_DEFAULTS, "prompt": PROMPT, "seed": 3, "min_p": 0.0})
        refused = {
            name: post(standin.url, {**TRL_DEFAULTS, "prompt": PROMPT, name: value})
            for name, value in [
                ("top_p", 0.9),
                ("top_k", 20),
                ("min_p", 0.05),
                ("repetition_penalty", 1.1),
                ("n", 2),
            ]
        }
    assert status == 200
    for name, (code, body) in refused.items():
        assert code == 400 and f"does not implement {name}=" in body["error"], (name, body)


def test_script_samples_restart_with_each_group(tiny_model):
    """`sample` is a rollout's place in its group: it counts a prompt's requests modulo the group size."""
    from ormix.workbench._vllm_standin import VLLMStandIn

    seen: list[int] = []

    def script(prompt: str, sample: int) -> str:
        seen.append(sample)
        return "ok"

    with VLLMStandIn(tiny_model, script=script, group_size=2) as standin:
        for prompt in [PROMPT, PROMPT, [*PROMPT, 15], PROMPT, PROMPT, [*PROMPT, 15]]:
            post(standin.url, {**TRL_DEFAULTS, "prompt": prompt})
    assert seen == [0, 1, 0, 0, 1, 1]


@pytest.fixture(autouse=True)
def _one_thread():
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)
