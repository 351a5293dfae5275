"""The vLLM rollout source against a fake server (HTTP) and a fake server process (a sleeping child we own)."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from evalkit.clients.openai_client import OpenAIClient
from evalkit.errors import UserError
from evalkit.types import SamplingArgs
from rl_backend.config import RLConfig
from rl_backend.sources.vllm_source import VLLMSource, server_command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class FakeVLLM:
    """Just enough of vLLM's OpenAI server: health, chat with token ids/logprobs, LoRA load/unload."""

    def __init__(self, port: int):
        self.calls: list[tuple[str, dict]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                return

            def _reply(self, code: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                self._reply(200 if self.path == "/health" else 404, {})

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                owner.calls.append((self.path, body))
                if self.path == "/v1/chat/completions":
                    self._reply(
                        200,
                        {
                            "prompt_token_ids": [1, 2, 3],
                            "choices": [
                                {
                                    "message": {"role": "assistant", "content": "42"},
                                    "finish_reason": "stop",
                                    "token_ids": [52, 50, 2],
                                    "logprobs": {"content": [{"token": "4", "logprob": -0.5}, {"token": "2", "logprob": -0.25}, {"token": "", "logprob": -0.1}]},
                                }
                            ],
                            "usage": {"prompt_tokens": 3, "completion_tokens": 3},
                        },
                    )
                else:
                    self._reply(200, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


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
            "inference": {"backend": "vllm", "port": port, "gpu_memory_utilization": 0.4, "startup_timeout_s": 20, "max_model_len": 1024},
            "trainer": {"lora": {"rank": 12}},
        }
    )


@pytest.fixture
def fake():
    port = _free_port()
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
        assert paths == [("/v1/load_lora_adapter", "step_1"), ("/v1/load_lora_adapter", "step_2"), ("/v1/unload_lora_adapter", "step_1")]
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
        VLLMSource(_config(_free_port()), FakePolicy(), tmp_path, launch=launch, model_dir=tmp_path)


def test_vllm_backend_without_cuda_is_refused():
    import torch

    from rl_backend.runner import resolve_backend

    config = _config(8000)
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(UserError, match="needs a CUDA GPU and vllm"):
        resolve_backend(config)
    assert resolve_backend(config.model_copy(update={"inference": config.inference.model_copy(update={"backend": "auto"})})) == "torch"


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
    from evalkit.errors import ConfigError
    from rl_backend.runner import Trainer

    config = _config(_free_port())
    config.env[0].id = "fact-search"
    with pytest.raises(ConfigError, match="set inference.tool_call_parser"):
        Trainer(config, tmp_path).setup("vllm")  # refused before any model or server starts
