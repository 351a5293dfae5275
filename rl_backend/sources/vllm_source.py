"""The GPU rollout source: a vLLM OpenAI-compatible server with LoRA hot-loading.

Only what is vLLM-specific lives here: the server (:class:`VLLMServer`: start, health, stop by
PID, or attach to one already running) and the adapters. vllm pins its own torch, so it often lives
in another environment: ``inference.vllm_command`` is the command that starts it there (the flags
below are appended), and ``inference.base_url`` names a server someone already started (it is
checked, never stopped). ``inference.gpus`` become the started server's ``CUDA_VISIBLE_DEVICES``.
Requests go through the project's OpenAI-compatible client
(:class:`~evalkit.clients.openai_client.OpenAIClient`, from :func:`evalkit.clients.factory.make_client`
with the server's model name as it serves it), so tool calls, ``stop``, ``seed``, ``top_k`` and any
extra sampling keys reach the server as they do in ``prime eval run``.

The server runs with ``--enable-lora``; after every trainer step the adapter is saved to
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
import secrets
import shlex
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from evalkit.clients.factory import make_client
from evalkit.clients.spec import ClientSpec
from evalkit.core.errors import ModelCallError, UserError
from evalkit.core.types import SamplingArgs
from evalkit.model.devices import cuda_available

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


def launcher_prefix(config: Any) -> list[str]:
    """How the server is started: ``inference.vllm_command``, else this interpreter's
    ``-m vllm.entrypoints.openai.api_server``.

    Both spellings vLLM documents take the model as ``--model``, so the rest of the command is the same
    (``vllm serve --model M`` and ``python -m vllm.entrypoints.openai.api_server --model M``).
    """
    command = config.inference.vllm_command
    return list(command) if command else [sys.executable, "-m", "vllm.entrypoints.openai.api_server"]


PARALLEL_FLAGS = ("--tensor-parallel-size", "-tp", "--data-parallel-size", "-dp", "--pipeline-parallel-size", "-pp")


def server_command(config: Any, model_dir: Path) -> list[str]:
    inference = config.inference
    lora = config.trainer.lora
    layout = _layout(config)
    command = [
        *launcher_prefix(config),
        "--model", str(model_dir),
        "--served-model-name", BASE_NAME,
        "--host", "127.0.0.1",
        "--port", str(inference.port),
        "--gpu-memory-utilization", str(layout.memory_utilization),
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
    if len(layout.inference) > 1 and not any(arg.split("=")[0] in PARALLEL_FLAGS for arg in inference.server_args):
        command += ["--tensor-parallel-size", str(len(layout.inference))]
    return command + list(inference.server_args)


def server_env(config: Any, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The server's environment: runtime LoRA loading on, and only ``inference.gpus`` visible.

    Indices are this process's view: under ``CUDA_VISIBLE_DEVICES=2,3``, ``gpus = [1]`` is device 3.
    """
    base = dict(os.environ if base is None else base)
    gpus = _layout(config).inference
    visible = [part.strip() for part in base.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    if visible and max(gpus) >= len(visible):
        raise UserError(
            f"inference.gpus = {gpus} but CUDA_VISIBLE_DEVICES={base['CUDA_VISIBLE_DEVICES']} shows this process "
            f"{len(visible)} GPU(s); use indices below {len(visible)}"
        )
    devices = [visible[g] for g in gpus] if visible else [str(g) for g in gpus]
    return {**base, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True", "CUDA_VISIBLE_DEVICES": ",".join(devices)}


def _layout(config: Any) -> Any:
    from rl_backend.gpus import plan_gpus

    try:
        return plan_gpus(config.inference.gpus, config.trainer.gpus, config.inference.gpu_memory_utilization,
                         trainer_on_gpu=cuda_available())
    except ValueError as exc:
        raise UserError(str(exc)) from None


def check_launcher(command: list[str]) -> None:
    """UserError when the command's program is not an executable (a typo in ``vllm_command``, another env missing)."""
    if shutil.which(command[0]) is None:
        raise UserError(
            f"inference.vllm_command: '{command[0]}' is not an executable file or on PATH; point it at the vLLM "
            "environment's python (with -m vllm.entrypoints.openai.api_server) or its vllm (with serve)"
        )


def _vllm_rank(rank: int) -> int:
    """vLLM accepts only some max-lora-rank values; take the smallest that fits."""
    for allowed in (8, 16, 32, 64, 128, 256, 320, 512):
        if rank <= allowed:
            return allowed
    raise UserError(f"trainer.lora.rank {rank} is above what vLLM supports (512)")


def server_root(base_url: str) -> str:
    """``http://host:8000/v1/`` -> ``http://host:8000`` (health and LoRA routes hang off the root)."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


class VLLMServer:
    """One vLLM server: started here (by PID, :meth:`start`) or already running (:meth:`attach`); health and admin
    calls."""

    def __init__(
        self,
        command: list[str] | None,
        base_url: str,
        launch: Callable[..., Any] = subprocess.Popen,
        log_path: Path | None = None,
        env: Mapping[str, str] | None = None,
    ):
        self.command = command
        self.base_url = base_url
        self._launch = launch
        self._log_path = log_path
        self._env = dict(env) if env is not None else {**os.environ, "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True"}
        self.process: Any = None

    def start(self, timeout_s: float) -> None:
        assert self.command is not None, "start() needs a command; attach() uses a running server"
        log = open(self._log_path, "ab") if self._log_path else subprocess.DEVNULL  # noqa: SIM115 - lives with the process
        try:
            self.process = self._launch(self.command, env=self._env, stdout=log, stderr=subprocess.STDOUT)
        except OSError as exc:
            raise UserError(f"could not start the vLLM server ({shlex.join(self.command[:3])} ...): {exc}") from exc
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise UserError(
                    f"the vLLM server exited with code {self.process.returncode} while starting; see {self._log_path}"
                )
            if self._healthy(5.0) is None:
                return
            time.sleep(1.0)
        self.stop()
        raise UserError(
            f"the vLLM server did not become healthy within {timeout_s:.0f}s; raise inference.startup_timeout_s"
        )

    def attach(self, timeout_s: float = 10.0) -> None:
        """UserError unless a server someone else started answers ``/health``."""
        problem = self._healthy(timeout_s)
        if problem is not None:
            raise UserError(
                f"no vLLM server answers at {self.base_url}/health ({problem}); start it, or remove inference.base_url "
                "to let prime start one"
            )

    def _healthy(self, timeout_s: float) -> str | None:
        """None when ``/health`` answers 200, else why not."""
        try:
            with urllib.request.urlopen(f"{self.base_url}/health", timeout=timeout_s) as reply:
                return None if reply.status == 200 else f"HTTP {reply.status}"
        except urllib.error.HTTPError as exc:
            return f"HTTP {exc.code}"
        except (urllib.error.URLError, ConnectionError, TimeoutError, OSError) as exc:
            return str(getattr(exc, "reason", exc))

    def get(self, path: str) -> Any:
        """A JSON GET (``/v1/models``)."""
        try:
            with urllib.request.urlopen(f"{self.base_url}{path}", timeout=30) as reply:
                return json.loads(reply.read() or b"null")
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise UserError(f"the vLLM server at {self.base_url} did not answer GET {path}: {exc}") from exc

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


def served_base_model(server: VLLMServer) -> str:
    """The name a running server serves its base model under (``/v1/models``' entry without a parent)."""
    listing = server.get("/v1/models")
    entries = listing.get("data") if isinstance(listing, dict) else None
    bases = [str(m.get("id")) for m in entries or [] if isinstance(m, dict) and not m.get("parent")]
    if len(bases) != 1:
        raise UserError(
            f"the vLLM server at {server.base_url} lists {len(bases)} base models ({', '.join(bases) or 'none'}) "
            "in /v1/models; "
            "RL needs a server with exactly one"
        )
    return bases[0]


class VLLMSource:
    """Rollouts from a vLLM server: one started here (this environment's vllm, or ``inference.vllm_command``)
    or one already running at ``inference.base_url``, which is checked (health, one base model, runtime
    LoRA loading) before any rollout and left as it was found on close (our adapter unloaded)."""

    name = "vllm"

    def __init__(
        self,
        config: Any,
        policy: Any,
        run_dir: Path,
        launch: Callable[..., Any] = subprocess.Popen,
        model_dir: Path | None = None,
    ):
        self.policy = policy
        self.run_dir = run_dir
        self.loaded: str | None = None
        self.sampling = SAMPLING.merged(None)
        base_url = config.inference.base_url
        if base_url is None:
            root = f"http://127.0.0.1:{config.inference.port}"
            command = server_command(config, model_dir or base_model_dir(config.model))
            if config.inference.vllm_command:
                check_launcher(command)
            self.server = VLLMServer(
                command, root, launch=launch, log_path=run_dir / "vllm_server.log", env=server_env(config)
            )
            self.server.start(config.inference.startup_timeout_s)
            self.base_name, self.prefix = BASE_NAME, ""
        else:
            self.server = VLLMServer(None, server_root(base_url))
            self.server.attach()
            self.base_name, self.prefix = served_base_model(self.server), f"primekit-{secrets.token_hex(3)}-"
            self._probe_lora(config)
        self.client: Any = make_client(
            ClientSpec(
                model=self.base_name, base_url=f"{self.server.base_url}/v1", served=True, timeout=REQUEST_TIMEOUT_S
            )
        )

    def _probe_lora(self, config: Any) -> None:
        """Load (then unload) the untrained adapter, so a server without runtime LoRA loading fails now, not after
        step 1."""
        name = f"{self.prefix}probe"
        folder = self.run_dir / "adapters" / name
        self.policy.save_trainable(folder)
        try:
            self.server.post("/v1/load_lora_adapter", {"lora_name": name, "lora_path": str(folder)})
        except ModelCallError as exc:
            why = (
                "it has no LoRA loading route (runtime LoRA loading is off)"
                if exc.status == 404
                else f"it refused a LoRA adapter ({exc})"
            )
            raise UserError(
                f"the vLLM server at {self.server.base_url} cannot train: {why}; "
                "start it with VLLM_ALLOW_RUNTIME_LORA_UPDATING=True, "
                f"--enable-lora --max-lora-rank {_vllm_rank(config.trainer.lora.rank)}, "
                f"and let it read {self.run_dir / 'adapters'}"
            ) from None
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        self.server.post("/v1/unload_lora_adapter", {"lora_name": name})

    def sync(self, policy: Any, step: int) -> None:
        """Save step ``step``'s adapter and hot-load it; step 0's adapter is the identity, so use the base."""
        if step == 0:
            self.client.model = self.base_name
            return
        name = f"{self.prefix}step_{step}"
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
        """No-op: a per-request seed would make a group's rollouts identical; vLLM sampling is not replayed on
        resume."""

    def export_model(self) -> Any:
        """A merged copy of the trainer's model (the server's weights are not readable from here)."""
        import copy

        merged = copy.deepcopy(self.policy.model)
        return merged.merge_and_unload() if hasattr(merged, "merge_and_unload") else merged

    def close(self) -> None:
        """Stop a server started here; on a running one, unload this run's adapter (best effort)."""
        if self.server.command is None and self.loaded is not None:
            try:
                self.server.post("/v1/unload_lora_adapter", {"lora_name": self.loaded})
            except (ModelCallError, OSError):
                pass  # the server may be gone; nothing of ours is left to clean there
        self.server.stop()
