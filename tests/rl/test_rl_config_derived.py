"""RL configs from the training docs that stopped on primekit's own defaults or an unmapped key, not on what lies
outside primekit: a default ``trainer.max_seq_len`` follows ``sampling.max_tokens`` (and the model's context length
when known), and prime-rl's older ``trainer.tokenizer`` is the model's own tokenizer or a precise refusal.
"""

from __future__ import annotations

import pytest
from support.rl_shapes import HOSTED, PRIME_RL_EXAMPLE, dry_run, on_embedded_model, shape_file

from evalkit.core.dotted import deep_merge
from evalkit.core.errors import ConfigError
from rl_backend.config import load_rl_config

LONG = deep_merge(HOSTED, {"sampling": {"max_tokens": 4096}})
"""The hosted example with long replies and no max_seq_len anywhere."""


def test_hosted_long_replies_plan_with_a_derived_max_seq_len(tmp_path):
    result = dry_run(shape_file(tmp_path, on_embedded_model(LONG)))
    assert result.exit_code == 0, result.output
    assert "# plan" in result.stdout
    config = load_rl_config(shape_file(tmp_path, on_embedded_model(LONG)))
    assert config.trainer.max_seq_len == 4096 + 1024  # max_tokens plus prompt room, within the model's 8192
    assert any("trainer.max_seq_len" in note and "5120" in note for note in config.notes)


def test_derived_max_seq_len_follows_what_the_config_says(tmp_path):
    short = load_rl_config(shape_file(tmp_path, on_embedded_model(HOSTED)))
    assert short.trainer.max_seq_len == 2048  # max_tokens 512: the default as before
    sized = load_rl_config(shape_file(tmp_path, on_embedded_model(deep_merge(LONG,
                                                                     {"inference": {"max_model_len": 6000}}))))
    assert sized.trainer.max_seq_len == 6000  # the sampler's context is the longest sample there is
    capped = load_rl_config(shape_file(tmp_path, on_embedded_model(deep_merge(LONG,
                                                                      {"sampling": {"max_tokens": 7900}}))))
    assert capped.trainer.max_seq_len == 8192  # the embedded model's context length
    with pytest.raises(ConfigError, match=r"sampling.max_tokens \(9000\) must be below the context length of "
                                          r"local/smollm2-135m \(8192\)"):
        load_rl_config(shape_file(tmp_path, on_embedded_model(deep_merge(LONG, {"sampling": {"max_tokens": 9000}}))))
    written = deep_merge(LONG, {"trainer": {"max_seq_len": 2048}})
    with pytest.raises(ConfigError, match=r"sampling.max_tokens \(4096\) must be below trainer.max_seq_len \(2048\)"):
        load_rl_config(shape_file(tmp_path, on_embedded_model(written)))  # a value the user wrote is kept, and checked


def test_older_prime_rl_tokenizer_equal_to_the_model_plans(tmp_path):
    model = "local/smollm2-135m"
    for tokenizer in (model, {"name": model}):
        data = deep_merge(on_embedded_model(PRIME_RL_EXAMPLE), {"trainer": {"tokenizer": tokenizer}})
        result = dry_run(shape_file(tmp_path, data))
        assert result.exit_code == 0, result.output
        config = load_rl_config(shape_file(tmp_path, data))
        assert any(note.startswith("trainer.tokenizer") for note in config.notes)


def test_older_prime_rl_tokenizer_other_than_the_model_is_refused_precisely(tmp_path):
    data = deep_merge(on_embedded_model(PRIME_RL_EXAMPLE), {"trainer": {"tokenizer": "Qwen/Qwen3-4B"}})
    result = dry_run(shape_file(tmp_path, data))
    assert result.exit_code == 2
    (line,) = [x for x in result.stderr.splitlines() if x.strip()]
    assert "trainer.tokenizer = 'Qwen/Qwen3-4B' differs from the model 'local/smollm2-135m'" in line
    assert "primekit samples and trains with the model's own tokenizer" in line
