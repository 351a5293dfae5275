"""Bad input is refused before the run, and input that gets adjusted says so."""

from __future__ import annotations

import json
import urllib.request

import pytest
from support.cli import prime
from support.fault_server import FaultServer

from evalkit.core.errors import ConfigError
from evalkit.core.sampling_rules import sampling_problems
from evalkit.core.types import SamplingArgs


@pytest.fixture
def server():
    started = FaultServer()
    yield started
    started.stop()


def chat_requests(server) -> list[dict]:
    return json.loads(urllib.request.urlopen(f"http://127.0.0.1:{server.port}/body_log").read())


@pytest.mark.parametrize(
    ("flags", "fragment"),
    [
        (["-S", '{"temperature": "hot"}'], "'temperature' must be a number of at least 0, got 'hot'"),
        (["-t", "-5"], "'max_tokens' must be a whole number of at least 1 (at most 16777216), got -5"),
        (["-S", '{"max_tokens": 2.5}'], "'max_tokens' must be a whole number"),
        (["-T", "-1"], "'temperature' must be a number of at least 0"),
        (["-S", '{"top_p": 1.5}'], "'top_p' must be a number in (0, 1]"),
        (["-S", '{"stop": 3}'], "'stop' must be a string or a list of strings"),
        (["-S", '{"n": 4}'], "'n' must be 1"),
        (["-S", '{"seed": true}'], "'seed' must be a whole number"),
    ],
)
def test_bad_sampling_args_are_refused_before_any_request(server, flags, fragment, tmp_path):
    result = prime("eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-o", str(tmp_path), *flags)
    assert result.exit_code == 2, result.output
    (line,) = [ln for ln in result.output.splitlines() if ln.startswith("error: ")]
    assert fragment in line
    assert chat_requests(server) == []  # not even the preflight
    assert not (tmp_path / "evals").exists()


def test_bad_sampling_in_a_toml_config_names_the_entry(tmp_path):
    config = tmp_path / "eval.toml"
    config.write_text('model = "stub"\n[[eval]]\nid = "reverse-text"\n[eval.sampling]\nmax_tokens = -5\n')
    result = prime("eval", "run", str(config))
    assert result.exit_code == 2 and "[[eval]] id=reverse-text" in result.output and "'max_tokens'" in result.output


def test_unknown_sampling_keys_pass_through_and_good_values_pass(server, tmp_path):
    result = prime(
        "eval",
        "run",
        "reverse-text",
        "-m",
        "stub",
        "-b",
        server.base_url,
        "-o",
        str(tmp_path),
        "-n",
        "1",
        "-r",
        "1",
        "-S",
        '{"temperature": 0, "top_p": 1, "stop": "</x>", "min_p": 0.1, "my_server_key": "x"}',
    )
    assert result.exit_code == 0, result.output
    sent = [body for body in chat_requests(server) if body.get("max_tokens") != 1]
    assert sent and sent[0]["my_server_key"] == "x" and sent[0]["temperature"] == 0


def test_sampling_args_from_code_are_checked_too():
    with pytest.raises(ConfigError, match="'temperature' must be a number"):
        SamplingArgs.from_dict({"temperature": "hot"})
    assert sampling_problems({"temperature": None, "max_tokens": 8, "logprobs": True}) == []


def test_num_examples_beyond_the_split_says_so(server, tmp_path):
    result = prime("eval", "run", "reverse-text", "-m", "stub", "-b", server.base_url, "-o", str(tmp_path),
                   "-n", "150", "-r", "1")
    assert result.exit_code == 0, result.output
    assert "-n 150: the eval split of 'reverse-text' has only 100 examples; evaluating all 100" in " ".join(
        result.output.split())
    (run_dir,) = (tmp_path / "evals" / "reverse-text--stub").iterdir()
    meta = json.loads((run_dir / "metadata.json").read_text())
    assert meta["num_examples"] == 100 and meta["num_examples_requested"] == 150
