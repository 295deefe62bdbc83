"""Rules written once and read everywhere: pass@k lists and step limits (`ormix.config._trainer_rules`)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ormix.config import MixtureConfig
from ormix.config._trainer_rules import max_steps_problem, pass_k_problem


@given(st.lists(st.integers(-3, 12), max_size=5), st.none() | st.integers(1, 10))
def test_pass_k_accepts_exactly_whole_numbers_from_1_to_the_samples(ks, samples):
    fine = bool(ks) and all(k >= 1 for k in ks) and (samples is None or max(ks) <= samples)
    assert (pass_k_problem(ks, samples) is None) == fine


@pytest.mark.parametrize("bad", [[True], [1.0], ["2"], []])
def test_pass_k_refuses_what_is_not_a_whole_number(bad):
    assert pass_k_problem(bad) is not None


def test_a_files_evaluation_k_follows_the_same_rule():
    base = {"members": {"a": {"target": "local:echo"}}}
    MixtureConfig.model_validate({**base, "evaluation": {"samples": 4, "k": [1, 4]}})
    for k in ([0, 4], [1, 8]):
        with pytest.raises(ValueError, match="evaluation.k: "):  # pydantic ValidationError
            MixtureConfig.model_validate({**base, "evaluation": {"samples": 4, "k": k}})


@given(st.integers(-5, 50))
def test_a_step_limit_is_at_least_one(n):
    assert (max_steps_problem(n) is None) == (n >= 1)
