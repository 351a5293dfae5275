"""`prime serve`: the embedded model as an OpenAI-compatible HTTP server."""

from __future__ import annotations

import socket
import sys

import typer

from evalkit.core.defaults import DEFAULT_MODEL
from evalkit.core.errors import UserError
from primekit_cli.errors import user_errors


@user_errors
def serve(
    model: str = typer.Option(
        DEFAULT_MODEL,
        "--model",
        "-m",
        help="Embedded model, Hub id (hf/ORG/NAME or ORG/NAME, from the local HF cache) or a model folder.",
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="Interface to listen on (0.0.0.0 for every interface)."),
    port: int = typer.Option(8000, "--port", "-p", help="TCP port."),
    dtype: str = typer.Option(
        "auto",
        "--dtype",
        help="auto (bf16 on CUDA and on CPUs with native bf16, else fp32; on CPU q4 for a 4-bit model file such as the "
        "embedded one), bf16, fp32 or q4 (4-bit linears, CPU only).",
    ),
    max_batch: int | None = typer.Option(
        None, "--max-batch", help="Most sequences decoded together in one step (default: 32 on CPU, 256 on CUDA)."
    ),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when there is a GPU), cpu, cuda or cuda:N."),
    api_key: str | None = typer.Option(
        None,
        "--api-key",
        envvar="PRIME_SERVE_API_KEY",
        show_envvar=True,
        help="Require 'Authorization: Bearer KEY' on /v1 (use it when binding another address than 127.0.0.1).",
    ),
) -> None:
    """Serve a model through the embedded engine as an OpenAI-compatible HTTP server (`/v1/chat/completions`, streamed
    with `stream: true` or not; `/v1/completions`; vLLM's `prompt_logprobs`, so it can be an opd teacher; `/v1/models`,
    `/health`).

    Examples:

    - `prime serve` serves local/smollm2-135m at http://127.0.0.1:8000/v1

    - `prime serve --port 8001 --dtype fp32 --max-batch 8`

    - `prime serve -m outputs/rl/run1/weights/step_50` serves an RL checkpoint

    - `prime serve -m Qwen/Qwen3-0.6B --device cuda --max-batch 128` (after `hf download Qwen/Qwen3-0.6B`)

    - `prime eval run reverse-text -m HuggingFaceTB/SmolLM2-135M-Instruct -b http://127.0.0.1:8000/v1`
      evaluates through the server (it also answers to its own -m name)
    """
    from evalkit.model.devices import check_device, resolve_device
    from evalkit.model.dtypes import choose_dtype, is_auto
    from evalkit.model.registry import resolve_model

    resolve_model(model)  # typos are reported before the port check and the load
    check_device(device)
    if not is_auto(dtype):
        choose_dtype(dtype, resolve_device(device))  # an unknown dtype, or q4 where it cannot run
    if max_batch is not None and max_batch < 1:
        raise UserError("--max-batch must be at least 1")
    if api_key is not None and not api_key.strip():
        raise UserError("--api-key is empty; pass a non-empty key or leave it out")
    _check_port_free(host, port)
    device = resolve_device(device)
    from evalkit.model.shared import get_engine
    from evalkit.serving.app import build_app, serve_forever

    engine = get_engine(model, dtype=dtype, max_batch=max_batch, device=device)
    app = build_app(engine, model, api_key=api_key)
    auth = "API key required" if api_key else "no API key"
    print(
        f"serving {model} at http://{host}:{port}/v1 ({engine.device}, {engine.dtype_choice.line()}, "
        f"max batch {engine.max_batch}, {auth}); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    if not api_key and host not in ("127.0.0.1", "localhost", "::1"):
        print(f"note: {host} is reachable from other machines and no --api-key is set", file=sys.stderr, flush=True)
    serve_forever(app, engine, host, port)


def _check_port_free(host: str, port: int) -> None:
    """A taken port is the user's to fix; say so before spending seconds loading the model."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UserError(f"cannot resolve --host {host}: {exc}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            raise UserError(f"cannot listen on {host}:{port} ({exc.strerror}); pass another --port") from None
