"""The only model-client layer: build clients with ``make_client(ClientSpec(...))``.

* :mod:`~evalkit.clients.spec` -- ``ClientSpec`` (its defaults: :mod:`evalkit.core.defaults`)
* :mod:`~evalkit.clients.routing` -- the one rule that picks a backend from a spec
* :mod:`~evalkit.clients.factory` -- ``make_client(spec)``, replicas, ``preflight(client)``
* :mod:`~evalkit.clients.base` -- the ``ModelClient`` contract
* backends: :mod:`~evalkit.clients.openai_client` (raw aiohttp), :mod:`~evalkit.clients.litellm_client`,
  :mod:`~evalkit.clients.local` (embedded engine); :mod:`~evalkit.clients.mock` (``mock/...`` scripted models); tests
  also build ``tests/support/scripted_client.py``
* :mod:`~evalkit.clients.retry` (one retry policy), :mod:`~evalkit.core.redact` (keys never leave)

This package's ``__init__`` imports nothing on purpose: the CLI must stay light.
"""
