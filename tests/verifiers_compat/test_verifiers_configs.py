"""verifiers users' inputs that need no verifiers install: config spellings, endpoint registries, resolution
order, `prime env install` forms, and the error when an environment needs the missing extra."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from evalkit.clients.endpoints import load_endpoints
from evalkit.core.errors import ConfigError, UserError
from evalkit.eval.config import load_eval_file
from evalkit.loading.install import HUB_INDEX, plan_install
from evalkit.loading.resolve import resolve
from gepa_cli.config import load_gepa_toml, toml_to_job_fields


# ----- eval / GEPA TOML spellings ----------------------------------------------------------------
def test_eval_toml_accepts_verifiers_spellings(tmp_path):
    config = tmp_path / "eval.toml"
    config.write_text(textwrap.dedent("""\
        model = "m"
        max_tokens = 128
        temperature = 0.3
        env_args = { difficulty = "easy", seed = 1 }

        [[eval]]
        env_id = "arithmetic"
        env_args = { seed = 7 }
        top_p = 0.9

        [[eval]]
        id = "reverse-text"
        [eval.sampling_args]
        max_tokens = 16
    """))
    first, second = load_eval_file(config)
    assert first.env_id == "arithmetic" and first.env_args == {"difficulty": "easy", "seed": 7}
    assert first.sampling == {"max_tokens": 128, "temperature": 0.3, "top_p": 0.9}
    assert second.env_id == "reverse-text" and second.sampling == {"max_tokens": 16, "temperature": 0.3}


@pytest.mark.parametrize("body, message", [
    ('[[eval]]\nid = "a"\nenv_id = "b"\n', "set id or env_id"),
    ('[[eval]]\nid = "a"\nargs = {}\nenv_args = {}\n', "set args or env_args"),
    ('max_tokens = 5\n[sampling]\nmax_tokens = 6\n[[eval]]\nid = "a"\n', "max_tokens is set both"),
    ('[sampling]\nx = 1\n[sampling_args]\ny = 2\n[[eval]]\nid = "a"\n', "not both"),
    ('[[eval]]\nid = "a"\nenv_argz = {}\n', "unknown key 'eval.0.env_argz'"),
])
def test_eval_toml_spelling_conflicts_are_one_line(tmp_path, body, message):
    config = tmp_path / "eval.toml"
    config.write_text(body)
    with pytest.raises(ConfigError, match=message):
        load_eval_file(config)


def test_gepa_toml_accepts_env_id_and_env_args(tmp_path):
    config = tmp_path / "gepa.toml"
    config.write_text(
        '[[env]]\nenv_id = "arithmetic"\nenv_args = { difficulty = "easy" }\n[[env]]\nid = "reverse-text"\n'
    )
    parsed, base = load_gepa_toml(config)
    assert toml_to_job_fields(parsed, base)["envs"] == [
        {"id": "arithmetic", "args": {"difficulty": "easy"}, "extra_env_kwargs": {}},
        {"id": "reverse-text", "args": {}, "extra_env_kwargs": {}}]
    config.write_text('[env]\nid = "a"\nenv_id = "b"\n')
    with pytest.raises(ConfigError, match="set id or env_id"):
        load_gepa_toml(config)


# ----- endpoints ------------------------------------------------------------------------------------
def test_endpoints_toml_accepts_verifiers_field_names_and_chat_types(tmp_path):
    file = tmp_path / "endpoints.toml"
    file.write_text(textwrap.dedent("""\
        [[endpoint]]
        endpoint_id = "qwen"
        model = "Qwen/Qwen3-8B"
        api_base_url = "http://localhost:8000/v1"
        api_key_var = "VLLM_API_KEY"
        api_client_type = "openai_chat_completions"

        [[endpoint]]
        endpoint_id = "qwen"
        model = "Qwen/Qwen3-8B"
        url = "http://localhost:8001/v1"
        key = "VLLM_API_KEY"
        type = "openai_chat_completions_token"
    """))
    (first, second) = load_endpoints(file)["qwen"]
    assert (first.url, first.key, first.type) == ("http://localhost:8000/v1", "VLLM_API_KEY", "openai")
    assert (second.url, second.type) == ("http://localhost:8001/v1", "openai")


@pytest.mark.parametrize("row, message", [
    ('type = "anthropic_messages"', "endpoint type 'anthropic_messages' is not supported"),
    ('key = "A"\napi_key_var = "B"', "'key' and 'api_key_var' are the same setting"),
])
def test_endpoint_spelling_errors(tmp_path, row, message):
    file = tmp_path / "endpoints.toml"
    file.write_text(f'[[endpoint]]\nendpoint_id = "x"\nmodel = "m"\nurl = "http://h/v1"\n{row}\n')
    with pytest.raises(ConfigError, match=message):
        load_endpoints(file)


def test_python_endpoint_registry_is_read_as_data(tmp_path, monkeypatch):
    registry = tmp_path / "configs" / "endpoints.py"
    registry.parent.mkdir()
    registry.write_text(textwrap.dedent("""\
        import os  # never executed: the file is parsed, not run
        os.environ["PRIMEKIT_TEST_RAN"] = "1"
        ENDPOINTS = {
            "mini": {"model": "gpt-4.1-mini", "url": "https://api.openai.com/v1", "key": "OPENAI_API_KEY"},
            "pair": [
                {"model": "q", "url": "http://a:8000/v1", "key": "K"},
                {"model": "q", "url": "http://b:8000/v1", "key": "K"},
            ],
        }
    """))
    monkeypatch.chdir(tmp_path)
    from evalkit.clients.endpoints import default_endpoints_path

    assert default_endpoints_path() == Path("configs/endpoints.py")
    endpoints = load_endpoints(default_endpoints_path())
    assert [e.url for e in endpoints["pair"]] == ["http://a:8000/v1", "http://b:8000/v1"]
    assert endpoints["mini"][0].model == "gpt-4.1-mini" and "PRIMEKIT_TEST_RAN" not in os.environ
    registry.write_text("ENDPOINTS = make_endpoints()\n")
    with pytest.raises(ConfigError, match="ENDPOINTS must be a literal dict"):
        load_endpoints(registry)


# ----- resolution order -----------------------------------------------------------------------------
ENV_MODULE = (
    "from evalkit.envs import SingleTurnEnv\n\n"
    "def load_environment():\n    return SingleTurnEnv(dataset=[{'question': 'q', 'answer': '{tag}'}])\n"
)


def test_installed_module_wins_over_local_folder_then_builtins_last(tmp_path, monkeypatch):
    local = tmp_path / "environments" / "shadow_env"
    local.mkdir(parents=True)
    (local / "shadow_env.py").write_text(ENV_MODULE.replace("{tag}", "local"))
    assert resolve("shadow-env", tmp_path / "environments").origin == "local"
    site = tmp_path / "site"
    site.mkdir()
    (site / "shadow_env.py").write_text(ENV_MODULE.replace("{tag}", "installed"))
    monkeypatch.syspath_prepend(str(site))
    source = resolve("owner/shadow-env", tmp_path / "environments")
    assert source.origin == "installed" and source.module_name == "shadow_env"
    (tmp_path / "environments" / "arithmetic").mkdir()
    (tmp_path / "environments" / "arithmetic" / "arithmetic.py").write_text(ENV_MODULE.replace("{tag}", "x"))
    assert resolve("arithmetic", tmp_path / "environments").origin == "local"  # built-ins come last


def test_a_bare_folder_on_the_path_is_not_an_installed_module(tmp_path, monkeypatch):
    (tmp_path / "arithmetic").mkdir()  # a namespace package to Python, not an environment
    monkeypatch.syspath_prepend(str(tmp_path))
    assert resolve("arithmetic", tmp_path / "environments").origin == "builtin"


BLOCK_VERIFIERS = textwrap.dedent("""\
    import importlib.abc, sys
    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "verifiers" or name.startswith("verifiers."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    sys.meta_path.insert(0, Block())
    from primekit_cli.app import main
    sys.argv = ["prime", "eval", "run", "vf-needs", "-n", "1"]
    main()
""")


def test_missing_verifiers_says_to_install_the_extra(tmp_path):
    folder = tmp_path / "environments" / "vf_needs"
    folder.mkdir(parents=True)
    (folder / "vf_needs.py").write_text(
        "import verifiers as vf\n\ndef load_environment():\n    return vf.SingleTurnEnv()\n"
    )
    done = subprocess.run([sys.executable, "-c", BLOCK_VERIFIERS], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines()[-1] == (
        "error: environment 'vf-needs' imports verifiers, which is not installed (No module named 'verifiers'); "
        "install one extra: pip install 'primekit[verifiers]' (verifiers 0.4, v1 tasksets) or "
        "pip install 'primekit[verifiers-legacy]' (verifiers 0.3.1, legacy environments and v1 tasksets)"
    )


# ----- prime env install ----------------------------------------------------------------------------
def test_install_forms(tmp_path):
    (tmp_path / "environments" / "my_env").mkdir(parents=True)
    (tmp_path / "environments" / "my_env" / "pyproject.toml").write_text("[project]\nname = 'my-env'\n")
    by_name = plan_install("my-env", tmp_path / "environments")
    assert by_name.pip_args[0] == "-e" and by_name.module == "my_env"
    hub = plan_install("primeintellect/reverse-text@0.1.2", tmp_path / "environments")
    assert hub.pip_args == ["reverse-text==0.1.2", "--extra-index-url", HUB_INDEX.format(owner="primeintellect")]
    assert hub.module == "reverse_text"
    assert plan_install("some-env", tmp_path / "environments").pip_args == ["some-env"]
    with pytest.raises(UserError, match="is not a folder"):
        plan_install("./missing", tmp_path / "environments")
    with pytest.raises(UserError, match="neither a folder nor a package name"):
        plan_install("not a name!", tmp_path / "environments")


def _wheel(folder: Path, name: str, module_source: str) -> Path:
    """A minimal wheel (built by hand: no build backend, no network)."""
    module = name.replace("-", "_")
    dist = f"{module}-0.1.0.dist-info"
    wheel = folder / f"{module}-0.1.0-py3-none-any.whl"
    files = {
        f"{module}.py": module_source,
        f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1.0\nRequires-Dist: primekit\n",
        f"{dist}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{dist}/RECORD"] = "".join(f"{path},,\n" for path in files) + f"{dist}/RECORD,,\n"
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, text in files.items():
            archive.writestr(path, text)
    return wheel


def test_env_install_by_package_name_then_run_from_anywhere(tmp_path):
    name = "primekit-test-installed-env"
    _wheel(
        tmp_path, name, '"""An environment installed from a package index."""\n' + ENV_MODULE.replace("{tag}", "pkg")
    )
    env = {**os.environ, "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(tmp_path), "HF_HUB_OFFLINE": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    prime = [sys.executable, "-m", "primekit_cli"]
    try:
        done = subprocess.run([*prime, "env", "install", f"someone/{name}"], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        assert (
            f"running: pip install {name} --extra-index-url https://hub.primeintellect.ai/someone/simple/"
            in done.stdout
        )
        listed = subprocess.run(
            [*prime, "env", "list"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120
        )
        assert f"{name}  installed  An environment installed from a package index." in listed.stdout
    finally:
        subprocess.run([sys.executable, "-m", "pip", "uninstall", "-y", "-q", name], capture_output=True, timeout=300)
