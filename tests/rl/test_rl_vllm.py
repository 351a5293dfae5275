"""The vLLM rollout source against a fake server (HTTP, tests/support/fake_vllm.py) and fake server processes we own:
a sleeping child, and the fake server itself started as vLLM from another environment (``vllm_command``)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import TESTS, free_port
from support.fake_vllm import FakeVLLM

from evalkit.clients.openai_client import OpenAIClient
from evalkit.core.errors import UserError
from evalkit.core.types import SamplingArgs
from rl_backend.config import RLConfig
from rl_backend.sources.vllm_source import VLLMSource, server_command


class FakePolicy:
    tokenizer = None

    def save_trainable(self, folder: Path) -> None:
        folder.mkdir(parents=True)
        (folder / "adapter_config.json").write_text("{}")


def _config(port: int) -> RLConfig:
    return RLConfig.model_validate(
        {
            "env": [{"id": "arithmetic"}],
            "batch_size": 8,
            "rollouts_per_example": 4,
            "inference": {
                "backend": "vllm",
                "port": port,
                "gpu_memory_utilization": 0.4,
                "startup_timeout_s": 20,
                "max_model_len": 1024,
            },
            "trainer": {"lora": {"rank": 12}},
        }
    )


@pytest.fixture
def fake():
    port = free_port()
    server = FakeVLLM(port)
    yield server, port
    server.close()


def test_server_command_enables_lora_and_processed_logprobs(tmp_path):
    command = server_command(_config(8000), tmp_path)
    joined = " ".join(command)
    assert "vllm.entrypoints.openai.api_server" in joined and "--enable-lora" in command
    assert command[command.index("--max-lora-rank") + 1] == "16"  # 12 rounded up to a rank vLLM accepts
    assert command[command.index("--logprobs-mode") + 1] == "processed_logprobs"
    assert command[command.index("--gpu-memory-utilization") + 1] == "0.4"
    assert command[command.index("--max-model-len") + 1] == "1024"
    assert "--enable-auto-tool-choice" not in command
    config = _config(8000)
    config.inference.tool_call_parser = "hermes"
    command = server_command(config, tmp_path)
    assert "--enable-auto-tool-choice" in command and command[command.index("--tool-call-parser") + 1] == "hermes"


def test_source_samples_and_hot_loads_adapters(tmp_path, fake):
    server, port = fake
    launched: list = []

    def launch(command, **kwargs):
        launched.append((command, kwargs["env"].get("VLLM_ALLOW_RUNTIME_LORA_UPDATING")))
        return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])

    source = VLLMSource(_config(port), FakePolicy(), tmp_path, launch=launch, model_dir=tmp_path)
    process = source.server.process
    try:
        assert isinstance(source.client, OpenAIClient)  # the project's HTTP client; only the server is vLLM-specific
        assert launched[0][1] == "True"
        source.sync(FakePolicy(), 0)
        sampling = source.sampling.merged(SamplingArgs(max_tokens=4, temperature=1.0))  # what the trainer sends
        completion = asyncio.run(source.client.chat([{"role": "user", "content": "6*7?"}], sampling))
        assert completion.text == "42" and completion.completion_token_ids == [52, 50, 2]
        assert completion.logprobs == [-0.5, -0.25, -0.1] and completion.prompt_token_ids == [1, 2, 3]
        sent = server.calls[-1][1]
        assert sent["model"] == "base" and sent["logprobs"] is True and sent["return_token_ids"] is True

        source.sync(FakePolicy(), 1)
        source.sync(FakePolicy(), 2)
        paths = [(path, body.get("lora_name")) for path, body in server.calls if "lora" in path]
        assert paths == [
            ("/v1/load_lora_adapter", "step_1"),
            ("/v1/load_lora_adapter", "step_2"),
            ("/v1/unload_lora_adapter", "step_1"),
        ]
        assert not (tmp_path / "adapters" / "step_1").exists() and (tmp_path / "adapters" / "step_2").is_dir()
        tools = [{"type": "function", "function": {"name": "search", "parameters": {"type": "object"}}}]
        extra = SamplingArgs(max_tokens=4, stop=["</answer>"], seed=3, top_k=5, extra={"min_p": 0.1})
        asyncio.run(source.client.chat([{"role": "user", "content": "x"}], source.sampling.merged(extra), tools))
        sent = server.calls[-1][1]
        assert sent["model"] == "step_2" and sent["tools"] == tools  # what the old vLLM-only client dropped now arrives
        assert (sent["stop"], sent["seed"], sent["top_k"], sent["min_p"]) == (["</answer>"], 3, 5, 0.1)
    finally:
        source.close()
    assert process.poll() is not None  # the process we started was ended (by its PID)


def test_server_that_dies_at_start_is_a_user_error(tmp_path):
    def launch(command, **kwargs):
        return subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])

    with pytest.raises(UserError, match="exited with code 3"):
        VLLMSource(_config(free_port()), FakePolicy(), tmp_path, launch=launch, model_dir=tmp_path)


def test_vllm_backend_without_cuda_is_refused():
    import torch

    from rl_backend.runner import resolve_backend

    config = _config(8000)
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(UserError, match="needs a CUDA GPU and vllm"):
        resolve_backend(config)
    assert (
        resolve_backend(
            config.model_copy(update={"inference": config.inference.model_copy(update={"backend": "auto"})})
        )
        == "torch"
    )


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA and vllm")
def test_vllm_two_steps_on_gpu(tmp_path):
    pytest.importorskip("vllm")
    from rl_backend.runner import run

    config = RLConfig.model_validate(
        {
            "max_steps": 2,
            "batch_size": 8,
            "rollouts_per_example": 4,
            "run_name": "gpu",
            "sampling": {"max_tokens": 16},
            "env": [{"id": "arithmetic", "args": {"difficulty": "easy"}}],
            "inference": {"backend": "vllm", "gpu_memory_utilization": 0.3, "max_model_len": 1024},
            "ckpt": {"interval": 1},
        }
    )
    summary = run(config, output_dir=tmp_path, skip_baseline=True)
    assert summary is not None and summary.last_metrics["step"] == 2
    assert (tmp_path / "rl" / "gpu" / "checkpoints" / "step_2" / "trainable" / "adapter_model.safetensors").is_file()


def test_tool_environment_on_vllm_needs_a_tool_call_parser(tmp_path):
    from evalkit.core.errors import ConfigError
    from rl_backend.runner import Trainer

    config = _config(free_port())
    config.env[0].id = "fact-search"
    with pytest.raises(ConfigError, match="set inference.tool_call_parser"):
        Trainer(config, tmp_path).setup("vllm")  # refused before any model or server starts


# ----- vLLM from another environment: vllm_command, base_url, GPUs ---------------------------------
FAKE_SERVER = TESTS / "support" / "fake_vllm.py"


def _external(port: int, **inference) -> RLConfig:
    return RLConfig.model_validate(
        {
            "env": [{"id": "arithmetic"}],
            "batch_size": 8,
            "rollouts_per_example": 4,
            "inference": {"port": port, "startup_timeout_s": 20, **inference},
            "trainer": {"lora": {"rank": 12}},
        }
    )


def test_vllm_command_starts_the_server_from_another_environment_on_its_gpus(tmp_path, monkeypatch):
    """The server process is the command given (here the fake server, run by a real subprocess), with the
    flags RL needs appended, runtime LoRA loading on and only inference.gpus visible."""
    record = tmp_path / "record.json"
    monkeypatch.setenv("FAKE_VLLM_RECORD", str(record))
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    port = free_port()
    config = _external(port, vllm_command=[sys.executable, str(FAKE_SERVER)], gpus=[1])
    config.trainer.gpus = [0]
    source = VLLMSource(config, FakePolicy(), tmp_path, model_dir=tmp_path)
    process = source.server.process
    try:
        seen = json.loads(record.read_text())
        assert seen["CUDA_VISIBLE_DEVICES"] == "1" and seen["lora_updating"] == "True"
        argv = seen["argv"]
        assert argv[argv.index("--model") + 1] == str(tmp_path) and argv[argv.index("--port") + 1] == str(port)
        assert argv[argv.index("--gpu-memory-utilization") + 1] == "0.9"  # its GPU to itself
        assert "--enable-lora" in argv and argv[argv.index("--logprobs-mode") + 1] == "processed_logprobs"
        source.sync(FakePolicy(), 0)
        completion = asyncio.run(
            source.client.chat([{"role": "user", "content": "6*7?"}], source.sampling.merged(None))
        )
        assert completion.text == "42" and completion.completion_token_ids == [52, 50, 2]
    finally:
        source.close()
    assert process.poll() is not None  # ended by its PID


def test_gpu_indices_follow_this_processes_visible_devices_and_several_mean_tensor_parallel(tmp_path):
    from rl_backend.sources.vllm_source import server_env

    config = _external(8000, vllm_command=["vllm", "serve"], gpus=[0, 2])
    config.trainer.gpus = [1]
    assert server_env(config, {"CUDA_VISIBLE_DEVICES": "4,5,6"})["CUDA_VISIBLE_DEVICES"] == "4,6"
    assert server_env(config, {})["CUDA_VISIBLE_DEVICES"] == "0,2"
    with pytest.raises(UserError, match="shows this process 2 GPU"):
        server_env(config, {"CUDA_VISIBLE_DEVICES": "4,5"})
    command = server_command(config, tmp_path)
    assert command[:4] == ["vllm", "serve", "--model", str(tmp_path)]  # `vllm serve --model M`, as vLLM documents it
    assert command[command.index("--tensor-parallel-size") + 1] == "2"
    config.inference.server_args = ["--data-parallel-size", "2"]
    assert "--tensor-parallel-size" not in server_command(config, tmp_path)  # the user's parallelism wins


def test_vllm_command_that_is_not_executable_is_one_line(tmp_path):
    python = str(tmp_path / "no-env" / "bin" / "python")
    config = _external(free_port(), vllm_command=[python, "-m", "vllm.entrypoints.openai.api_server"])
    with pytest.raises(UserError, match="inference.vllm_command: '.*no-env/bin/python' is not an executable"):
        VLLMSource(config, FakePolicy(), tmp_path, model_dir=tmp_path)


def test_base_url_uses_a_running_server_checks_lora_and_leaves_it_running(tmp_path):
    port = free_port()
    server = FakeVLLM(port, served_name="my-qwen")
    try:
        source = VLLMSource(_external(8765, base_url=f"http://127.0.0.1:{port}/v1"), FakePolicy(), tmp_path)
        assert source.server.process is None and source.client.model == "my-qwen"
        probe = [(p, b["lora_name"]) for p, b in server.calls if "lora" in p]
        assert [p for p, _ in probe] == [
            "/v1/load_lora_adapter",
            "/v1/unload_lora_adapter",
        ]  # checked before any rollout
        assert not (tmp_path / "adapters" / probe[0][1]).exists()
        source.sync(FakePolicy(), 0)
        asyncio.run(source.client.chat([{"role": "user", "content": "x"}], source.sampling.merged(None)))
        assert server.calls[-1][1]["model"] == "my-qwen"
        source.sync(FakePolicy(), 1)
        name = source.client.model
        assert name.startswith("primekit-") and name.endswith("step_1") and server.loaded == [name]  # unique per run
        source.close()
        assert server.loaded == []  # our adapter unloaded; the server itself keeps running
        assert asyncio.run(_health(port)) == 200
    finally:
        server.close()


async def _health(port: int) -> int:
    import urllib.request

    return await asyncio.to_thread(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5).status)


def test_base_url_without_a_server_or_without_runtime_lora_is_refused_with_the_fix(tmp_path):
    with pytest.raises(
        UserError, match=r"no vLLM server answers at http://127.0.0.1:\d+/health .*remove inference.base_url"
    ):
        VLLMSource(_external(8765, base_url=f"http://127.0.0.1:{free_port()}"), FakePolicy(), tmp_path)
    port = free_port()
    server = FakeVLLM(port, lora_routes=False)
    try:
        with pytest.raises(
            UserError,
            match="runtime LoRA loading is off.*"
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, --enable-lora --max-lora-rank 16",
        ):
            VLLMSource(_external(8765, base_url=f"http://127.0.0.1:{port}"), FakePolicy(), tmp_path)
    finally:
        server.close()


def test_vllm_from_elsewhere_needs_no_vllm_or_cuda_here(monkeypatch):
    import importlib.util

    from rl_backend.runner import resolve_backend

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed here")
    for inference in ({"vllm_command": ["vllm", "serve"], "gpu_memory_utilization": 0.5}, {"base_url": "http://127.0.0.1:8000"}):
        for backend in ("auto", "vllm"):
            assert resolve_backend(_external(8000, backend=backend, **inference)) == "vllm"


@pytest.mark.parametrize(
    "inference, trainer, needle",
    [
        ({"vllm_command": ["vllm", "serve"], "base_url": "http://h:1"}, {}, "not both"),
        ({"base_url": "http://h:1", "gpus": [0]}, {}, "inference.gpus has no effect on an already running server"),
        ({"base_url": "h:1"}, {}, "must start with http://"),
        ({"vllm_command": ["vllm", "serve"], "backend": "torch"}, {}, "are for backend 'vllm'"),
        (
            {"vllm_command": ["vllm", "serve"], "gpu_memory_utilization": 0.9},
            {"gpus": [0]},
            "share GPU 0, so inference.gpu_memory_utilization (0.9) must be at most 0.8",
        ),
        ({"vllm_command": ["vllm", "serve"], "gpus": [1], "gpu_memory_utilization": 0.9}, {"gpus": [1]}, "share GPU 1"),
        ({"vllm_command": ["vllm", "serve"]}, {"gpus": [0, 1]}, "the trainer runs on one GPU"),
        ({"vllm_command": []}, {}, "inference.vllm_command is empty"),
        ({"gpus": [0], "backend": "torch"}, {}, "inference.gpus is for a vLLM server"),
    ],
)
def test_inference_and_gpu_settings_that_cannot_work_are_refused(inference, trainer, needle):
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as err:
        RLConfig.model_validate({"env": [{"id": "arithmetic"}], "batch_size": 8, "rollouts_per_example": 4,
                                 "inference": inference, "trainer": trainer})
    assert needle in str(err.value)


def test_a_shared_gpu_is_checked_once_it_is_known_the_trainer_uses_one(monkeypatch):
    """Without trainer.gpus the trainer's device is known only at run time: CUDA here means GPU 0."""
    import rl_backend.plan as plan
    from evalkit.core.errors import ConfigError

    config = _external(8000, vllm_command=["vllm", "serve"], gpu_memory_utilization=0.9)
    monkeypatch.setattr(plan, "cuda_available", lambda: False)  # a CPU torch here, vLLM with its own CUDA elsewhere
    assert plan.resolve_backend(config) == "vllm"
    monkeypatch.setattr(plan, "cuda_available", lambda: True)
    with pytest.raises(ConfigError, match="share GPU 0"):
        plan.resolve_backend(config)


def test_prime_rl_gpu_id_keys_are_accepted():
    config = RLConfig.model_validate(
        {
            "env": [{"id": "a"}],
            "batch_size": 8,
            "rollouts_per_example": 4,
            "inference_gpu_ids": [0],
            "trainer_gpu_ids": [1],
            "inference": {"vllm_command": ["vllm", "serve"]},
        }
    )
    assert config.inference.gpus == [0] and config.trainer.gpus == [1]
    from rl_backend.plan import gpu_layout

    layout = gpu_layout(config)
    assert layout.memory_utilization == 0.9 and not layout.shared
