"""The GPU rollout source: a vLLM OpenAI-compatible server subprocess with LoRA hot-loading.

Only what is vLLM-specific lives here: the server process (:class:`VLLMServer`: start, health,
stop by PID) and the adapters. Requests go through the project's OpenAI-compatible client
(:class:`~evalkit.clients.openai_client.OpenAIClient`), so tool calls, ``stop``, ``seed``, ``top_k``
and any extra sampling keys reach the server as they do in ``prime eval run``.

The server is started once with ``--enable-lora``; after every trainer step the adapter is saved to
``<run>/adapters/step_N`` and loaded into the running server (``POST /v1/load_lora_adapter``,
which needs ``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``), then the client's model name becomes that
adapter's. The previous adapter is unloaded. Full fine-tuning would need a weight broadcast into the
server and is refused by the config (use LoRA, or the torch backend).

The server must report the *processed* (temperature-scaled) log-probability of each sampled token
(``--logprobs-mode processed_logprobs``) and the token ids (``return_token_ids``, in the source's
``sampling``), since the trainer's importance ratio compares against exactly those. Tool calls are
parsed by the server when ``inference.tool_call_parser`` is set. vllm is imported by the subprocess
only; this module never imports it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalkit.clients.openai_client import OpenAIClient
from evalkit.errors import ModelCallError, UserError
from evalkit.types import SamplingArgs

BASE_NAME = "base"
REQUEST_TIMEOUT_S = 600.0
SAMPLING = SamplingArgs(logprobs=True, extra={"return_token_ids": True, "skip_special_tokens": False})
"""What every request to the server carries: sampled-token logprobs and token ids (prompt and completion)."""


def base_model_dir(model: str) -> Path:
    """The HF folder vLLM should load (the embedded GGUF is converted once, like everywhere else)."""
    from evalkit.model.loading import ensure_converted
    from evalkit.model.registry import GgufModel, resolve_model

    source = resolve_model(model)
    if isinstance(source, GgufModel):
        return ensure_converted(source)
    if source.adapter is not None or source.path is None:
        raise UserError(f"vLLM training needs a full model folder as 'model', not an adapter ({model}); merge it first")
    return source.path


def server_command(config: Any, model_dir: Path) -> list[str]:
    inference = config.inference
    lora = config.trainer.lora
    command = [
        sys.executable, "-m", "vllm.entrypoints.openai.api_server",
        "--model", str(model_dir),
        "--served-model-name", BASE_NAME,
        "--host", "127.0.0.1",
        "--port", str(inference.port),
        "--gpu-memory-utilization", str(inference.gpu_memory_utilization),
        "--enable-lora",
        "--max-lora-rank", str(_vllm_rank(lora.rank)),
        "--max-loras", "2",
        "--logprobs-mode", "processed_logprobs",
        "--seed", str(config.seed),
    ]  # fmt: skip
    if inference.max_model_len:
        command += ["--max-model-len", str(inference.max_model_len)]
    if inference.tool_call_parser:
        command += ["--enable-auto-tool-choice", "--tool-call-parser", inference.tool_call_parser]
    return command + list(inference.server_args)


def _vllm_rank(rank: int) -> int:
    """vLLM accepts only some max-lora-rank values; take the smallest that fits."""
    for allowed in (8, 16, 32, 64, 128, 256, 320, 512):
        if rank <= allowed:
            return allowed
    raise UserError(f"trainer.lora.rank {rank} is above what vLLM supports (512)")


class VLLMServer:
    """Owns the server process (by PID) and its health check."""

    def __init__(self, command: list[str], base_url: str, launch: Callable[..., Any] = subprocess.Popen, log_path: Path | None = None):
        self.command = command
        self.base_url = base_url
        self._launch = launch
        self._log_path = log_path
        self.process: Any = None

    def start(self, timeout_s: float) -> None:
        env = {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
        log = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL  # noqa: SIM115 - lives with the process
        self.process = self._launch(self.command, env=env, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise UserError(f"the vLLM server exited with code {self.process.returncode} while starting; see {self._log_path}")
            try:
                with urllib.request.urlopen(f"{self.base_url}/health", timeout=5) as reply:
                    if reply.status == 200:
                        return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(1.0)
        self.stop()
        raise UserError(f"the vLLM server did not become healthy within {timeout_s:.0f}s; raise inference.startup_timeout_s")

    def post(self, path: str, body: dict[str, Any]) -> None:
        request = urllib.request.Request(
            f"{self.base_url}{path}", data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
        )
        try:
            with urllib.request.urlopen(request, timeout=120) as reply:
                reply.read()
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode(errors="replace")[:300]
            raise ModelCallError(f"vLLM {path} failed with HTTP {exc.code}: {detail}", status=exc.code) from exc

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


class VLLMSource:
    name = "vllm"

    def __init__(self, config: Any, policy: Any, run_dir: Path, launch: Callable[..., Any] = subprocess.Popen, model_dir: Path | None = None):
        self.policy = policy
        self.run_dir = run_dir
        base_url = f"http://127.0.0.1:{config.inference.port}"
        command = server_command(config, model_dir or base_model_dir(config.model))
        self.server = VLLMServer(command, base_url, launch=launch, log_path=run_dir / "vllm_server.log")
        self.server.start(config.inference.startup_timeout_s)
        self.client = OpenAIClient(BASE_NAME, f"{base_url}/v1", timeout=REQUEST_TIMEOUT_S)
        self.sampling = SAMPLING.merged(None)
        self.loaded: str | None = None

    def sync(self, policy: Any, step: int) -> None:
        """Save step ``step``'s adapter and hot-load it; step 0's adapter is the identity, so use the base."""
        if step == 0:
            self.client.model = BASE_NAME
            return
        name = f"step_{step}"
        if self.loaded == name:
            return
        folder = self.run_dir / "adapters" / name
        policy.save_trainable(folder)
        self.server.post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})
        previous, self.loaded = self.loaded, name
        self.client.model = name
        if previous is not None:
            self.server.post("/v1/unload_lora_adapter", {"lora_name": previous})
            shutil.rmtree(self.run_dir / "adapters" / previous, ignore_errors=True)

    def reseed(self, seed: int) -> None:
        """No-op: a per-request seed would make a group's rollouts identical; vLLM sampling is not replayed on resume."""

    def export_model(self) -> Any:
        """A merged copy of the trainer's model (the server's weights are not readable from here)."""
        import copy

        merged = copy.deepcopy(self.policy.model)
        return merged.merge_and_unload() if hasattr(merged, "merge_and_unload") else merged

    def close(self) -> None:
        self.server.stop()
