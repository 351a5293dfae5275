"""How ``-m``/``-M`` pick a backend, for the ``--help`` epilog of ``prime eval run`` and ``prime gepa run``.

The short form of the rule in :mod:`evalkit.clients.routing` (the one implementation); keep the two in step.
"""

from __future__ import annotations

from evalkit.core.defaults import DEFAULT_MODEL

MODELS_EPILOG = f"""
Models (-m, and -M for gepa), first match wins:

  1. no -m and no -b: the embedded {DEFAULT_MODEL}

  2. litellm/PROVIDER/MODEL: litellm (pip install 'primekit[litellm]'; key from the provider's env var, e.g. \
ANTHROPIC_API_KEY, or -k)

  3. local/..., hf/ORG/NAME (local Hugging Face cache only), ./path or a folder holding a model: the embedded engine

  4. without -b: an endpoint_id in endpoints.toml (-e; default ./configs/endpoints.toml); replicas round-robin

  5. without -b: an embedded alias (smollm2-135m); without -b and $OPENAI_BASE_URL: \
ORG/NAME found in the local Hugging Face cache

  6. otherwise an OpenAI-compatible server at -b, else $OPENAI_BASE_URL, else https://api.openai.com/v1 \
(key from -k VAR, default OPENAI_API_KEY)
"""
