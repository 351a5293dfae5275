"""The embedded engine: name resolution, offline loading, batching, forwards and sampling.

Import the pieces from their modules; this package imports nothing heavy so that resolving a
model name (:mod:`evalkit.model.registry`) or a device name never pulls in torch.

* :mod:`~evalkit.model.registry` -- ``local/smollm2-135m``, Hub ids (local HF cache) and model folders -> weight sources
* :mod:`~evalkit.model.devices` -- ``auto`` / ``cpu`` / ``cuda[:N]``
* :mod:`~evalkit.model.loading` -- GGUF -> cached safetensors, torch model + tokenizer
* :mod:`~evalkit.model.engine` -- :class:`Engine`: requests, weight updates, the worker thread
* :mod:`~evalkit.model.scheduler` -- continuous batching: admission, prefill, decode windows, retirement
* :mod:`~evalkit.model.stepper` -- decode steps on the device (CUDA graphs on CUDA)
* :mod:`~evalkit.model.forward` / :mod:`~evalkit.model.hf_forward` -- the fused Llama-family forward / the Hugging
  Face fallback
* :mod:`~evalkit.model.tensors` -- where the fused snapshot reads tensors: a live module, or a folder's safetensors
  (no module built)
* :mod:`~evalkit.model.dtypes` / :mod:`~evalkit.model.quant` -- dtype ``auto``'s rule / 4-bit (``q4``) linears on CPU
* :mod:`~evalkit.model.kvcache`, :mod:`~evalkit.model.sampling`, :mod:`~evalkit.model.weights`,
  :mod:`~evalkit.model.threads`
* :mod:`~evalkit.model.shared` -- :func:`get_engine`: one engine per model, dtype and device per process
"""
