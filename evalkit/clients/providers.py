"""vf-eval's ``-p/--provider`` presets and ``--api-client-type`` values, resolved onto a :class:`ClientSpec`.

A provider is shorthand for a base URL and the NAME of the env var holding its key, as verifiers
0.3.1 defines them. Explicit ``-b``/``-k`` win over the preset. Two presets point at a local server
(``local``, ``vllm``): their key variable is used only when it is set, since a local server usually
wants no key. ``anthropic`` speaks the Anthropic Messages API, which primekit reaches through litellm
(``-m litellm/anthropic/MODEL``), so it is refused with that hint, as is every client type other than
OpenAI chat completions. Nothing here sends a request.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

from evalkit.core.errors import UserError
from evalkit.core.redact import register_secret_headers


@dataclass(frozen=True)
class Provider:
    url: str
    key_var: str
    local: bool = False
    """A server on this machine: the key variable is optional."""


PROVIDERS: dict[str, Provider] = {
    "prime": Provider("https://api.pinference.ai/api/v1", "PRIME_API_KEY"),
    "openrouter": Provider("https://openrouter.ai/api/v1", "OPENROUTER_API_KEY"),
    "openai": Provider("https://api.openai.com/v1", "OPENAI_API_KEY"),
    "minimax": Provider("https://api.minimax.chat/v1", "MINIMAX_API_KEY"),
    "deepseek": Provider("https://api.deepseek.com/v1", "DEEPSEEK_API_KEY"),
    "glm": Provider("https://open.bigmodel.cn/api/paas/v4", "GLM_API_KEY"),
    "local": Provider("http://localhost:8000/v1", "VLLM_API_KEY", local=True),
    "vllm": Provider("http://localhost:8000/v1", "VLLM_API_KEY", local=True),
}
"""vf-eval's presets that speak OpenAI chat completions (``anthropic`` is handled apart, see the module docstring)."""
PROVIDER_CHOICES = (*PROVIDERS, "anthropic")

CLIENT_TYPES = (
    "openai_completions", "openai_chat_completions", "openai_chat_completions_token", "openai_responses",
    "renderer", "anthropic_messages", "nemorl_chat_completions",
)
"""vf-eval's ``--api-client-type`` choices; primekit's HTTP client is ``openai_chat_completions``."""
SUPPORTED_CLIENT_TYPE = "openai_chat_completions"


def apply_provider(
    provider: str | None, base_url: str | None, api_key_var: str | None
) -> tuple[str | None, str | None]:
    """``(base_url, api_key_var)`` with the preset filling what ``-b``/``-k`` left unset."""
    if provider is None:
        return base_url, api_key_var
    if provider == "anthropic":
        raise UserError("-p anthropic: the Anthropic Messages API goes through litellm here; "
                        "use -m litellm/anthropic/MODEL (key in $ANTHROPIC_API_KEY) and drop -p")
    preset = PROVIDERS.get(provider)
    if preset is None:
        raise UserError(f"-p/--provider: unknown provider '{provider}'; choose one of {', '.join(PROVIDER_CHOICES)}")
    if api_key_var is None and (not preset.local or os.environ.get(preset.key_var)):
        api_key_var = preset.key_var
    return base_url or preset.url, api_key_var


def check_client_type(client_type: str | None) -> None:
    """Accept ``openai_chat_completions`` (what primekit speaks); refuse the others with what to use."""
    if client_type is None or client_type == SUPPORTED_CLIENT_TYPE:
        return
    if client_type == "anthropic_messages":
        raise UserError("--api-client-type anthropic_messages: use -m litellm/anthropic/MODEL (litellm speaks the "
                        "Anthropic Messages API) and drop --api-client-type")
    if client_type not in CLIENT_TYPES:
        raise UserError(f"--api-client-type: unknown type '{client_type}'; choose one of {', '.join(CLIENT_TYPES)}")
    raise UserError(
        f"--api-client-type {client_type} is not supported: primekit's HTTP client speaks OpenAI chat "
        f"completions only; drop the flag (or pass {SUPPORTED_CLIENT_TYPE}), or use -m litellm/PROVIDER/MODEL"
    )


def parse_headers(values: list[str] | None) -> dict[str, str]:
    """``--header 'Name: Value'`` (repeatable) -> ``{Name: Value}``, as vf-eval parses them."""
    headers: dict[str, str] = {}
    for raw in values or []:
        if ":" not in raw:
            raise UserError("--header must be 'Name: Value' (one header per --header); got a value without ':'")
        name, value = (part.strip() for part in raw.split(":", 1))
        if not name:
            raise UserError("--header name cannot be empty ('Name: Value')")
        problem = header_problem(name, value)
        if problem:
            raise UserError(f"--header {name[:40]!r}: {problem}")
        headers[name] = value
    register_secret_headers(headers)  # before any dry run prints them
    return headers


_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def header_problem(name: str, value: str) -> str | None:
    """Why ``name: value`` cannot be sent as one HTTP header, or ``None`` (RFC 9110: the name a token, the
    value without control characters; a CR/LF would start another header, which HTTP clients refuse)."""
    if not _TOKEN.fullmatch(name):
        return "a header name is letters, digits and !#$%&'*+.^_`|~- only (no spaces, ':' or line breaks)"
    if "\r" in value or "\n" in value:
        return "its value holds a line break (CR/LF): one header per --header (or per table entry)"
    if _CONTROL.search(value):
        return "its value holds a control character; headers are printable text"
    return None
