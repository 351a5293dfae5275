"""verifiers 0.4's dotted flags on environments that are not v1 tasksets (issue 46, cause 3): those that mean the
same for any environment (``--sampling.*``, ``--client.*``, ``--select.limit/shuffle/seed``) apply to primekit's
own and to legacy verifiers environments; the rest are refused in one line. A v1 taskset still reads them as
verifiers' run config. Before: every dotted flag stopped a non-v1 environment with "'reverse-text' is not a
verifiers v1 taskset"."""

from __future__ import annotations

import json
import shutil

import pytest
from support import VERIFIERS_ENVS
from support.cli import prime


def planned(result) -> dict:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{"):])


def test_sampling_client_and_select_flags_apply_to_a_builtin_environment():
    result = prime("eval", "run", "reverse-text", "--sampling.temperature", "0.5", "--sampling.max-tokens", "12",
                   "--client.base-url", "http://127.0.0.1:9/v1", "--client.api-key-var", "MY_KEY",
                   "--select.limit", "2", "--select.shuffle", "--select.seed", "7", "-r", "2", "-c", "3", "--dry-run")
    (config,) = planned(result)["evals"]
    assert config["env_id"] == "reverse-text" and config["sampling"] == {"temperature": 0.5, "max_tokens": 12}
    assert (config["base_url"], config["api_key_var"]) == ("http://127.0.0.1:9/v1", "MY_KEY")
    assert (config["num_examples"], config["shuffle"], config["seed"]) == (2, True, 7)
    assert (config["rollouts_per_example"], config["max_concurrent"]) == (2, 3)


def test_primekit_flags_win_over_dotted_ones_key_by_key():
    result = prime("eval", "run", "reverse-text", "--sampling.temperature", "0.5", "--sampling.top-p", "0.9",
                   "-T", "0.2", "-n", "4", "--select.limit", "2", "--dry-run")
    (config,) = planned(result)["evals"]
    assert config["sampling"] == {"temperature": 0.2, "top_p": 0.9} and config["num_examples"] == 4


@pytest.mark.parametrize("flag", ["--env.taskset.split", "--run.name", "--client.type", "--select.include.idx"])
def test_run_config_settings_are_refused_in_one_line(flag):
    result = prime("eval", "run", "reverse-text", flag, "x", "--dry-run")
    assert result.exit_code == 2, result.output
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert lines == [f"error: {flag} is a setting of a verifiers v1 taskset's run config, and 'reverse-text' is not a "
                     "v1 taskset; here --sampling.*, --client.* (base-url, api-key-var, headers) and --select.* "
                     "(limit, shuffle, seed) apply, beside primekit's flags (-a '{...}' for its arguments)"]


@pytest.mark.verifiers
def test_a_legacy_environment_takes_them_and_a_v1_taskset_reads_them_as_its_run_config(tmp_path, monkeypatch):
    verifiers = pytest.importorskip("verifiers", reason="needs a verifiers extra")
    for name in ("vf_single", "vf_v1_math"):
        shutil.copytree(VERIFIERS_ENVS / name, tmp_path / "environments" / name)
    monkeypatch.chdir(tmp_path)
    legacy = str(verifiers.__version__).startswith("0.3.")
    if legacy:
        (config,) = planned(prime("eval", "run", "vf-single", "--sampling.temperature", "0.5", "--dry-run"))["evals"]
        assert config["sampling"] == {"temperature": 0.5}
    result = prime("eval", "run", "vf-v1-math", "--sampling.temperature", "0.5", "--dry-run")
    if legacy:  # the run-config dialect is read with verifiers 0.4's classes
        assert result.exit_code == 2 and "verifiers 0.4's config dialect" in result.output
    else:
        document = planned(result)
        assert document["evals"][0]["sampling"]["temperature"] == 0.5 and "verifiers" in document
