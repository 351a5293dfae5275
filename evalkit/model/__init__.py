"""The embedded model: name resolution, offline loading, the batching engine and its sampler.

Import the pieces from their modules; this package imports nothing heavy so that resolving a
model name (:mod:`evalkit.model.registry`) never pulls in torch.

* :mod:`~evalkit.model.registry` -- ``local/smollm2-135m`` and model folders -> weight sources
* :mod:`~evalkit.model.loading` -- GGUF -> cached safetensors, torch model + tokenizer
* :mod:`~evalkit.model.engine` -- :class:`Engine`: continuous batching, weight updates
* :mod:`~evalkit.model.shared` -- :func:`get_engine`: one engine per model and dtype per process
"""
