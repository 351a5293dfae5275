"""Scrubbing secrets out of every string that reaches a file, a log or the terminal.

Gateways and proxies often echo the request (headers included) in their error bodies, so an HTTP
error can carry the caller's own API key back -- to the client layer, or to an environment's judge or
tool. So redaction sits at the boundaries, whatever raised the text: a rollout's error as it is
recorded (``RolloutState.record_error``), every row and JSON or text file as it is written, and read
back (:mod:`evalkit.core.untrusted`, :mod:`evalkit.core.readback`), log records, the CLI's ``error:`` line,
ModelCallError messages.

Two defences, because neither alone is enough:

* the exact values the client layer was given: API keys read from the environment
  (:func:`register_secret`, called where a key is read), every configured header value but a few benign ones
  (:func:`register_secret_headers`, called where a config's headers are validated) and every credential-named value
  of a config's environment args, a harness's ``env`` table included (:func:`register_named_secrets`);
* patterns, for secrets it was never told about: values of ``Authorization``,
  ``Proxy-Authorization``, ``api-key``, ``x-api-key`` (and ``x-goog-api-key``) headers in any of
  the shapes they come back in (``Name: value``, JSON, Python reprs), ``Bearer`` tokens,
  ``sk-...`` style keys, and credentials in URLs (``https://user:pass@host``).

The registry is process-wide on purpose: a key registered by the client that read it must also be
scrubbed from a log line or an error printed by code that never saw the client.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from typing import Any

REDACTED = "[redacted]"
MIN_SECRET_LENGTH = 4
"""Shorter values are not treated as secrets (replacing them would mangle ordinary text)."""

_SECRET_HEADER = re.compile(r"(?i)(authorization|api[-_]?key|token|secret)")
SECRET_NAME = re.compile(r"(?i)(key|token|secret|pass|auth|cookie|credential|session|signature|private)")
"""A header or environment variable named like this holds a credential (``MY_PASSWORD``, ``X-Custom-Auth``)."""
BENIGN_HEADERS = frozenset({"accept", "accept-encoding", "accept-language", "cache-control", "connection",
                            "content-type", "user-agent"})
"""Headers whose values are not secrets; every other configured header value is one."""
MIN_PLAIN_HEADER_SECRET = 8
"""A header value under a name that does not say "credential" counts from this length (``X-Debug: true`` would
otherwise redact every "true" in the rows)."""

_HEADER_VALUE = re.compile(
    r"""(?ix)
    (\b(?:proxy-)?authorization|\bx-goog-api-key|\bx-api-key|\bapi[-_]key)  # the header's name
    (["']?\s*[:=]\s*["']?)                                                  # : or = with optional quotes
    ((?:bearer|basic|token)\s+)?                                            # an auth scheme
    ([^\s"',;}\]]+)                                                         # the value
    """
)
_BEARER = re.compile(r"(?i)\b(bearer\s+)([A-Za-z0-9._~+/=-]{6,})")
_KEY_SHAPED = re.compile(r"\b(sk|pk|rk)-[A-Za-z0-9_-]{16,}")
_URL_CREDENTIALS = re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s:@]+:[^/\s@]+@")

_lock = threading.Lock()
_secrets: tuple[str, ...] = ()
_json_spellings: tuple[str, ...] = ()
"""Registered values as they are spelled inside a JSON string, where that differs (a quote, a backslash)."""


def register_secret(value: str | None) -> None:
    """Remember ``value`` (an API key, a token) so :func:`redact` replaces it wherever it appears."""
    global _secrets, _json_spellings
    if not value or len(value) < MIN_SECRET_LENGTH or value in _secrets:
        return
    with _lock:
        # longest first, so a key that contains another registered value is replaced whole
        _secrets = tuple(sorted({*_secrets, value}, key=len, reverse=True))
        spelled = json.dumps(value, ensure_ascii=False)[1:-1]
        if spelled != value:
            _json_spellings = (*_json_spellings, spelled)


def registered_secrets() -> tuple[str, ...]:
    """Every value registered so far, longest first."""
    return _secrets


def register_secret_headers(headers: dict[str, str] | None) -> None:
    """Register every configured header value but those of :data:`BENIGN_HEADERS`: a gateway's custom auth header,
    a cookie, a tenant id are all credentials to someone. A value under a name that says so counts from
    :data:`MIN_SECRET_LENGTH` characters, any other from :data:`MIN_PLAIN_HEADER_SECRET`; the token after an auth
    scheme (``Bearer x``) and each cookie's value are registered on their own too, as servers echo them apart."""
    for name, raw in (headers or {}).items():
        value = str(raw)
        if name.lower() in BENIGN_HEADERS:
            continue
        named = bool(_SECRET_HEADER.search(name) or SECRET_NAME.search(name))
        parts = [value]
        if value.lower().startswith(("bearer ", "basic ", "token ")):
            parts.append(value.split(None, 1)[-1])
        if "cookie" in name.lower():
            parts.extend(piece.split("=", 1)[-1].strip() for piece in value.split(";"))
        for part in parts:
            if named or len(part) >= MIN_PLAIN_HEADER_SECRET:
                register_secret(part)


def register_named_secrets(data: object) -> None:
    """Register what a config's environment args hold for a child process or a server, at any depth: each value
    of an ``env`` table (verifiers 0.4's ``[env.agent.harness] env``) whose variable name is credential-like
    (:data:`SECRET_NAME`: ``MY_PASSWORD``, ``SERVICE_TOKEN``), and a ``headers`` table as
    :func:`register_secret_headers` does. Other args are left alone: ``sort_key = "name"`` is no secret."""
    if isinstance(data, dict):
        for name, value in data.items():
            if name == "env" and isinstance(value, dict):
                for variable, text in value.items():
                    if isinstance(text, str) and SECRET_NAME.search(str(variable)):
                        register_secret(text)
            elif name == "headers" and isinstance(value, dict):
                register_secret_headers({str(k): str(v) for k, v in value.items()})
            else:
                register_named_secrets(value)
    elif isinstance(data, (list, tuple)):
        for item in data:
            register_named_secrets(item)


def register_env_secrets() -> None:
    """Register every value of this process's environment whose name looks like a credential
    (:data:`SECRET_NAME`: ``HF_TOKEN``, ``GITHUB_TOKEN``, ``*_API_KEY``, ``AWS_SECRET_ACCESS_KEY``,
    ``AWS_SESSION_TOKEN``, ``DB_PASSWORD``...), from 8 characters on.

    For what may echo them although this process never handed them over: backends that read provider keys
    themselves (litellm reads ``ANTHROPIC_API_KEY`` and friends), and the model's commands on the ``subprocess``
    runtime, which run as this user and may print a file or a ``/proc`` entry holding them. A value that is an
    existing absolute path (``SSH_AUTH_SOCK``, ``GIT_ASKPASS``) names a file, it is not the secret: left alone.
    """
    for name, value in os.environ.items():
        if credential_variable(name) and len(value) >= 8 and not (os.path.isabs(value) and os.path.exists(value)):
            register_secret(value)


_CREDENTIAL_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pass", "passphrase",
                               "auth", "cookie", "credential", "credentials", "signature", "private", "pat"})
"""Words of a variable's name that say it holds a credential. Whole words only: a desktop's environment has
``GIT_AUTHOR_NAME``, ``XDG_SESSION_DESKTOP`` or ``KEYBOARD_LAYOUT``, whose values (a person's name, a desktop's
name) would otherwise be scrubbed from every reply the model writes."""


def credential_variable(name: str) -> bool:
    """Whether an environment variable's name says it holds a credential: one of its words (split on ``_``, ``-``
    and ``.``) is a credential word, or a word ends in one (``OPENAI_APIKEY``, ``GHTOKEN``)."""
    words = [word for word in re.split(r"[_.\-]+", name.lower()) if word]
    return any(word in _CREDENTIAL_WORDS or word.endswith(("token", "secret", "apikey", "password")) for word in words)


def scrub_secrets(text: str) -> str:
    """``text`` with every registered secret value replaced, and nothing else touched.

    For whole output files (results rows, reports, metadata): the credential patterns of
    :func:`redact` would also rewrite what a model legitimately wrote about headers or keys."""
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    return text


def scrub_data(value: Any) -> Any:
    """``value`` (JSON-like: a chat request's messages) with every registered secret replaced in its strings, keys
    included; the very same object when nothing needed replacing. Only registered values: the credential
    patterns of :func:`redact` would rewrite what a conversation legitimately says about headers or keys."""
    if not _secrets:
        return value
    if isinstance(value, str):
        return scrub_secrets(value)
    if isinstance(value, dict):
        pairs = [(scrub_data(k), scrub_data(v)) for k, v in value.items()]
        changed = any(k2 is not k or v2 is not v for (k, v), (k2, v2) in zip(value.items(), pairs))
        return dict(pairs) if changed else value
    if isinstance(value, (list, tuple)):
        items = [scrub_data(item) for item in value]
        return value if all(a is b for a, b in zip(items, value)) else type(value)(items)
    return value


def redact(text: str) -> str:
    """``text`` with every registered secret and every credential-shaped substring replaced."""
    if not text:
        return text
    for secret in _secrets:
        if secret in text:
            text = text.replace(secret, REDACTED)
    header, bearer, key, url = _may_match(text)
    if header:
        text = _HEADER_VALUE.sub(_keep_name, text)
    if bearer:
        text = _BEARER.sub(r"\g<1>" + REDACTED, text)
    if key:
        text = _KEY_SHAPED.sub(REDACTED, text)
    return _URL_CREDENTIALS.sub(lambda m: m.group(1) + REDACTED + "@", text) if url else text


def contains_secret(text: str) -> bool:
    """Whether :func:`redact` may change ``text``, in plain text or as JSON (a registered value also in its
    JSON-escaped spelling): one scan per pattern and no copy, for writers that check every row."""
    if not text:
        return False
    for secret in _secrets + _json_spellings:
        if secret in text:
            return True
    patterns = (_HEADER_VALUE, _BEARER, _KEY_SHAPED, _URL_CREDENTIALS)
    return any(maybe and pattern.search(text) for maybe, pattern in zip(_may_match(text), patterns))


def _may_match(text: str) -> tuple[bool, bool, bool, bool]:
    """Which of the four patterns could match, from literals each needs: ``str`` scans run at memory speed,
    while the patterns (case-insensitive, anchored on word boundaries) crawl through long texts."""
    low = text.lower()
    return ("authorization" in low or "api-key" in low or "api_key" in low, "bearer" in low,
            "sk-" in text or "pk-" in text or "rk-" in text, "://" in text and "@" in text)


def _keep_name(match: re.Match[str]) -> str:
    name, separator, scheme, value = match.groups()
    if value.startswith(REDACTED[:-1]):  # already scrubbed (the value pattern stops before its "]")
        return match.group(0)
    return f"{name}{separator}{scheme or ''}{REDACTED}"


class RedactingFilter(logging.Filter):
    """A logging filter that scrubs a record's final message (attach it to a handler).

    The message is formatted once here and the arguments dropped, so a formatter further down
    cannot re-insert an unscrubbed argument.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        scrubbed = redact(message)
        if scrubbed != message or record.args:
            record.msg, record.args = scrubbed, None
        if record.exc_info and record.exc_text is None and record.exc_info[1] is not None:
            record.exc_text = redact(logging.Formatter().formatException(record.exc_info))
        return True
