"""The one backend rule (evalkit.clients.routing) and the ClientSpec -> client builder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

from evalkit.clients import factory
from evalkit.clients.routing import in_hf_cache, route
from evalkit.clients.spec import ClientSpec
from evalkit.core.defaults import DEFAULT_MODEL, DEFAULT_TIMEOUT_S
from evalkit.core.errors import ConfigError, UserError


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No ambient server URL, an empty HF cache, and no ./configs/endpoints.toml in the cwd."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.chdir(tmp_path)


def cache_model(tmp_path: Path, repo_id: str) -> None:
    org, name = repo_id.split("/")
    lay_out_hf_cache(tmp_path / "hf-cache", org, name)


def lay_out_hf_cache(cache: Path, org: str, name: str) -> None:
    """The hub cache's real layout: ``refs/main`` names the snapshot holding the files."""
    repo = cache / f"models--{org}--{name}"
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_text("{}")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")


def endpoints_file(tmp_path: Path, body: str) -> str:
    path = tmp_path / "endpoints.toml"
    path.write_text(body)
    return str(path)


def test_no_model_and_no_url_is_the_default_embedded_model():
    assert route(ClientSpec()).backend == "local" and route(ClientSpec()).model == DEFAULT_MODEL


@pytest.mark.parametrize("model", ["local/smollm2-135m", "hf/Qwen/Qwen3-0.6B", "./weights/step_3", "~/m", "/abs/m"])
def test_local_hf_and_path_names_go_to_the_embedded_engine_even_with_a_url(model):
    chosen = route(ClientSpec(model, base_url="http://127.0.0.1:9/v1"))
    assert (chosen.backend, chosen.model) == ("local", model)


def test_a_served_name_goes_to_its_server_even_when_it_looks_like_a_path():
    """RL's vLLM source asks the server for its model's name; `vllm serve /models/qwen` serves it as a path."""
    chosen = route(ClientSpec("/models/qwen", base_url="http://127.0.0.1:9/v1", served=True))
    assert (chosen.backend, chosen.model, chosen.base_url) == ("http", "/models/qwen", "http://127.0.0.1:9/v1")
    client = factory.make_client(ClientSpec("/models/qwen", base_url="http://127.0.0.1:9/v1", served=True, timeout=30))
    assert (type(client).__name__, client.model, client.timeout) == ("OpenAIClient", "/models/qwen", 30)
    with pytest.raises(ConfigError, match="served model needs"):
        ClientSpec("base", served=True)


def test_an_engine_built_by_the_caller_is_served_by_the_embedded_client_over_it():
    engine = object()  # never called: the client only holds it
    client = factory.make_client(ClientSpec("/weights/tiny", engine=engine))
    assert (type(client).__name__, client.model, client.engine) == ("LocalClient", "/weights/tiny", engine)


def test_litellm_prefix_routes_to_litellm_with_the_provider_model():
    chosen = route(ClientSpec("litellm/anthropic/claude-sonnet-4-5"))
    assert (chosen.backend, chosen.model) == ("litellm", "anthropic/claude-sonnet-4-5")
    with pytest.raises(UserError, match="litellm/<provider>/<model>"):
        route(ClientSpec("litellm/gpt-4.1"))


def test_endpoint_id_needs_no_url_and_wins_over_other_rules(tmp_path):
    path = endpoints_file(tmp_path, '[[endpoint]]\nendpoint_id = "Org/Name"\nmodel = "served"\nurl = "http://127.0.0.1:9/v1"\n')
    cache_model(tmp_path, "Org/Name")
    chosen = route(ClientSpec("Org/Name", endpoints_path=path))
    assert (chosen.backend, chosen.model, len(chosen.endpoints)) == ("endpoint", "served", 1)
    with pytest.raises(UserError, match="'other' not found"):
        route(ClientSpec("other", endpoints_path=path))
    assert route(ClientSpec(endpoint_id="Org/Name", endpoints_path=path)).backend == "endpoint"


def test_local_type_endpoint_goes_to_the_embedded_engine(tmp_path):
    path = endpoints_file(
        tmp_path, '[[endpoint]]\nendpoint_id = "tiny"\nmodel = "local/smollm2-135m"\ntype = "local"\n'
    )
    assert route(ClientSpec("tiny", endpoints_path=path)).backend == "local"


def test_bare_hub_id_in_the_local_cache_is_embedded_only_without_a_server_url(tmp_path, monkeypatch):
    cache_model(tmp_path, "Org/Cached")
    assert in_hf_cache("Org/Cached") and not in_hf_cache("Org/Missing")
    chosen = route(ClientSpec("Org/Cached"))
    assert (chosen.backend, chosen.model) == ("local", "hf/Org/Cached")
    assert route(ClientSpec("Org/Cached", base_url="http://127.0.0.1:9/v1")).backend == "http"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    assert route(ClientSpec("Org/Cached")).backend == "http"


def test_hf_home_is_honoured(tmp_path, monkeypatch):
    monkeypatch.delenv("HF_HUB_CACHE")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "home"))
    lay_out_hf_cache(tmp_path / "home" / "hub", "A", "B")
    assert route(ClientSpec("A/B")).backend == "local"


def test_everything_else_is_http_at_the_url_or_the_default(monkeypatch):
    assert route(ClientSpec("Org/Name", base_url="http://127.0.0.1:9/v1")).base_url == "http://127.0.0.1:9/v1"
    assert route(ClientSpec("gpt-4.1-mini")).base_url == "https://api.openai.com/v1"
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:7/v1")
    assert route(ClientSpec("gpt-4.1-mini")).base_url == "http://127.0.0.1:7/v1"
    with pytest.raises(UserError, match="without a model"):
        route(ClientSpec(base_url="http://127.0.0.1:9/v1"))


@pytest.mark.parametrize("timeout", [0, -1, float("inf"), float("nan")])
def test_spec_rejects_timeouts_that_never_end(timeout):
    with pytest.raises(ConfigError, match="timeout must be a positive number"):
        ClientSpec(timeout=timeout)
    assert ClientSpec().timeout == DEFAULT_TIMEOUT_S == 600


def test_device_reaches_the_local_client(monkeypatch):
    from evalkit.clients import local

    calls = []
    monkeypatch.setattr(local, "LocalClient", lambda model, **kwargs: calls.append((model, kwargs)) or "LOCAL")
    factory.make_client(ClientSpec("local/smollm2-135m"))
    factory.make_client(ClientSpec("local/smollm2-135m", device="cuda:1"))
    assert calls == [("local/smollm2-135m", {"device": None, "engine": None}),
                     ("local/smollm2-135m", {"device": "cuda:1", "engine": None})]


def test_http_spec_carries_retries_timeout_and_headers():
    client = factory.make_client(ClientSpec("m", "http://127.0.0.1:9/v1", max_retries=7, timeout=12.5,
                                            headers={"X-Team": "evals"}))
    assert (client.max_retries, client.timeout, client._headers["X-Team"]) == (7, 12.5, "evals")


def test_the_default_model_name_is_written_once():
    """One constant: no other module spells the default model's name as a literal."""
    found = subprocess.run(
        [
            "git",
            "grep",
            "-n",
            "-F",
            f'"{DEFAULT_MODEL}"',
            "--",
            "evalkit",
            "gepa_cli",
            "primekit_cli",
            "rl_backend",
            ":!*.toml",
            ":!*.md",
            ":!primekit_cli/lab_configs/*",
        ],  # example configs are data, like the .toml ones
        cwd=REPO,
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    code = [line for line in found if not line.split(":", 2)[2].lstrip().startswith(("result =", "#", "-", "*"))]
    assert [line.split(":")[0] for line in code] == ["evalkit/core/defaults.py"], code


def test_prime_help_imports_no_heavy_library():
    script = (
        "import sys; from primekit_cli.app import app; "
        "print(json.dumps([m for m in ('litellm', 'aiohttp', 'torch', 'datasets', 'pandas', 'transformers') "
        "if m in sys.modules]))"
    )
    out = subprocess.run([sys.executable, "-c", "import json; " + script], capture_output=True, text=True, cwd=REPO)
    assert json.loads(out.stdout) == [], out.stderr
