"""evalkit/core/dotted.py: the one merge, dotted-flag reader and dotted get/pop behind RL overrides, verifiers 0.4's
dotted flags and the prime-rl shape translation."""

from __future__ import annotations

import pytest

from evalkit.core import dotted
from evalkit.core.errors import ConfigError
from primekit_cli.dialect.args import raw_config, take_dialect_tokens
from rl_backend.config import parse_overrides


def test_deep_merge_merges_tables_replaces_the_rest_and_changes_neither_input():
    base = {"a": {"b": 1, "c": [1]}, "d": 1}
    over = {"a": {"c": [2], "e": {"f": 3}}, "d": {"g": 4}}
    merged = dotted.deep_merge(base, over)
    assert merged == {"a": {"b": 1, "c": [2], "e": {"f": 3}}, "d": {"g": 4}}
    merged["a"]["e"]["f"] = 9
    merged["a"]["b"] = 9
    assert base == {"a": {"b": 1, "c": [1]}, "d": 1} and over["a"]["e"] == {"f": 3}


def test_read_flag_takes_an_equals_value_the_next_value_or_true():
    def is_value(token: str) -> bool:
        return not token.startswith("--")

    assert dotted.read_flag(["--a.b=1", "x"], 0, is_value) == ("a.b", "1", 1)
    assert dotted.read_flag(["x", "--a.b", "2", "y"], 1, is_value) == ("a.b", "2", 3)
    assert dotted.read_flag(["--a.b", "--c"], 0, is_value) == ("a.b", "true", 1)
    assert dotted.read_flag(["--a.b"], 0, is_value) == ("a.b", "true", 1)
    assert dotted.read_flag(["--a.b="], 0, is_value) == ("a.b", "", 1)


def test_keys_split_on_dots_with_dashes_as_underscores():
    assert dotted.key_parts("trainer.max-steps") == ["trainer", "max_steps"]
    assert dotted.key_parts("a..b") is None and dotted.key_parts(".a") is None
    assert len(dotted.key_parts(".".join(["a"] * 64))) == 64
    with pytest.raises(ConfigError, match=r"^--a\.a\.a.*\.\.\.: a dotted key of more than 64 parts"):
        dotted.key_parts(".".join(["a"] * 65))
    assert dotted.nested(["a", "b", "c"], 1) == {"a": {"b": {"c": 1}}}
    assert dotted.nested(["a"], 1) == {"a": 1}


def test_get_and_pop_by_dotted_key_prune_emptied_tables():
    data = {"trainer": {"optim": {"lr": 1}, "keep": 2}, "x": None}
    assert dotted.get(data, "trainer.optim.lr") == 1 and dotted.get(data, "x") is None
    assert dotted.get(data, "trainer.nope") is dotted.MISSING and dotted.get(data, "x.y") is dotted.MISSING
    dotted.pop(data, "trainer.optim.lr")
    assert data == {"trainer": {"keep": 2}, "x": None}


def test_both_command_lines_read_dotted_flags_alike_and_keep_their_own_values():
    """RL reads TOML values and refuses a clash; verifiers' dialect keeps text and lets the later flag win."""
    assert parse_overrides(["--trainer.max-steps", "3", "--trainer.lora"]) == {
        "trainer": {"max_steps": 3, "lora": True}}
    rest, found = take_dialect_tokens(["env", "--sampling.max-tokens", "3", "--rich", "--a.b", "-1"])
    assert rest == ["env", "--rich"] and found.overrides == [("sampling.max-tokens", "3"), ("a.b", "-1")]
    assert raw_config([], [("sampling.max-tokens", "3"), ("sampling.max-tokens", "4")], None) == {
        "sampling": {"max_tokens": "4"}}
