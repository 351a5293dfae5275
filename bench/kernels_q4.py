"""Which 4-bit (and 8-bit head) CPU kernel is fastest for the embedded model's decode matmuls, and how exact.

Run by hand: ``python bench/kernels_q4.py [--threads 1 2] [--rows 1 8] [--rounds 5] [--layers 30]``.
For each linear shape of SmolLM2-135M (per layer: qkv [960x576], o [576x576], gate_up [3072x576],
down [576x1536]; 30 layers, 120 calls a decode step) and the tied head [49152x576], it times every kernel it
finds at ``--rows`` rows and ``--threads`` threads and prints µs per call, the speed ratio to today's kernel
(torch's ``_weight_int4pack_mm_for_cpu`` as :class:`evalkit.model.quant.Q4Linear` calls it; > 1: faster) and
the largest error relative to the largest output of the exact product (float64 ``x @ W.T`` with the file's
Q4_1 / Q8_0 values, which :func:`evalkit.model.quant.quantize_q4` recovers exactly). Then a decode step's
matmul cost per path: 30 x the four linears + the head.

Why each call cycles through ``--layers`` layers' weights: one decode step reads every layer once, so a kernel
timed on one weight that stays in cache would look faster than it is in the engine.

With the project's venv alone it measures today's kernel, fp32 and the head variants. It adds rows when
``torchao`` and ``onnxruntime`` (+ ``onnx`` to build the graph) are importable, e.g. from a scratch venv layered
on the project's (docs/engine-speed.md, "4-bit kernels on AVX2"); each path that refuses here prints one
line with its message. ``onnxruntime``'s ``MatMulNBits`` runs as one graph of ``--layers`` nodes (one per
layer's weight, all on the same input), so its row is kernel time per call; the Python-call overhead of one
``InferenceSession.run`` (and of an I/O-bound run) is printed apart.

Rounds interleave the paths (A, B, C, A, B, C, ...) and the table shows medians; the load average is
printed beside them, since the machine may be shared.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from evalkit.model.quant import GROUP, Q4Linear, dequantize_q4, quantize_q4  # noqa: E402

TODAY = "torch int4 bf16 (today)"
Run = Callable[[int], torch.Tensor]
"""Computes the product with layer ``i``'s weight on the bench's input; float32 [rows, out]."""
Builder = Callable[[list[torch.Tensor], torch.Tensor, int], Run]
"""(exact float32 weights per layer [out, in], input [rows, in], threads) -> :data:`Run`; raises on refusal."""


class Refused(Exception):
    """A path that cannot run here (library absent, op not built for this CPU, ...)."""


@dataclass
class Shape:
    name: str
    weights: list[torch.Tensor] = field(repr=False)
    per_step: int
    """Calls in one decode step (30 for a layer's linear, 1 for the head)."""


def load_shapes(layers: int) -> tuple[list[Shape], Shape]:
    """The four linear shapes (``layers`` layers each, Q4_1 values) and the head (Q8_0 values), from the
    embedded model's converted snapshot (the GGUF dequantized to float32; converted once if absent)."""
    from safetensors import safe_open

    from evalkit.core.defaults import DEFAULT_MODEL
    from evalkit.model.loading import ensure_converted
    from evalkit.model.registry import KNOWN_MODELS

    folder = ensure_converted(KNOWN_MODELS[DEFAULT_MODEL])
    with safe_open(str(folder / "model.safetensors"), "pt") as tensors:
        total = 1 + max(int(k.split(".")[2]) for k in tensors.keys() if k.startswith("model.layers."))

        def get(i: int, *names: str) -> torch.Tensor:
            cat = torch.cat([tensors.get_tensor(f"model.layers.{i}.{n}.weight") for n in names])
            return dequantize_q4(*quantize_q4(cat))

        picked = range(min(layers, total))
        linears = [
            Shape("qkv", [get(i, "self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj") for i in picked], total),
            Shape("o", [get(i, "self_attn.o_proj") for i in picked], total),
            Shape("gate_up", [get(i, "mlp.gate_proj", "mlp.up_proj") for i in picked], total),
            Shape("down", [get(i, "mlp.down_proj") for i in picked], total),
        ]
        head = Shape("head", [q8_exact(tensors.get_tensor("model.embed_tokens.weight"))], 1)
    for shape in (*linears, head):
        out, width = shape.weights[0].shape
        shape.name = f"{shape.name} [{out}x{width}]"
    return linears, head


def q8_blocks(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(``q`` int8 [out, in], ``d`` float32 [out, in / GROUP]): Q8_0's ``w = d * q``; exact on Q8_0 values,
    whose largest magnitude in a block is ``127 d``."""
    out, width = weight.shape
    groups = weight.float().reshape(out, width // GROUP, GROUP)
    d = groups.abs().amax(dim=-1) / 127
    q = (groups / torch.where(d > 0, d, 1)[..., None]).round_().clamp_(-127, 127).to(torch.int8)
    return q.reshape(out, width), d


def q8_exact(weight: torch.Tensor) -> torch.Tensor:
    q, d = q8_blocks(weight)
    out, width = q.shape
    return (q.reshape(out, width // GROUP, GROUP).float() * d[..., None]).reshape(out, width)


# ---- torch (always present) ----


def fp32_linear(weights: list[torch.Tensor], x: torch.Tensor, threads: int) -> Run:
    return lambda i: F.linear(x, weights[i])


def fp32_transposed(weights: list[torch.Tensor], x: torch.Tensor, threads: int) -> Run:
    stored = [w.T.contiguous() for w in weights]
    return lambda i: x @ stored[i]


def half_linear(dtype: torch.dtype) -> Builder:
    def build(weights: list[torch.Tensor], x: torch.Tensor, threads: int) -> Run:
        stored = [w.to(dtype) for w in weights]
        return lambda i: F.linear(x.to(dtype), stored[i]).float()

    return build


def torch_int4(weights: list[torch.Tensor], x: torch.Tensor, threads: int) -> Run:
    linears = [Q4Linear(w) for w in weights]
    return lambda i: linears[i](x)


def torch_int8_channel(dtype: torch.dtype) -> Builder:
    """``_weight_int8pack_mm``: int8 weights with one scale per output channel (not Q8_0's per-block scales,
    so it rounds the file's values)."""

    def build(weights: list[torch.Tensor], x: torch.Tensor, threads: int) -> Run:
        packs = []
        for w in weights:
            scale = w.abs().amax(dim=1) / 127
            q = (w / torch.where(scale > 0, scale, 1)[:, None]).round_().clamp_(-127, 127).to(torch.int8)
            packs.append((q, scale.to(dtype)))
        return lambda i: torch.ops.aten._weight_int8pack_mm(x.to(dtype), *packs[i]).float()

    return build


# ---- torchao (optional) ----


def torchao_config(make: Callable[[], Any], dtype: torch.dtype) -> Builder:
    """A ``torchao.quantization.quantize_`` config applied to an ``nn.Linear`` per layer, run in ``dtype``."""

    def build(weights: list[torch.Tensor], x: torch.Tensor, threads: int) -> Run:
        try:
            from torchao.quantization import quantize_
        except ImportError as exc:
            raise Refused(f"torchao not importable ({exc})") from None
        modules = []
        for w in weights:
            linear = torch.nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=dtype)
            with torch.no_grad():
                linear.weight.copy_(w)
            try:
                quantize_(linear, make())
            except Exception as exc:  # noqa: BLE001 - any refusal is the finding, printed as a line
                raise Refused(_one_line(exc)) from None
            if type(linear.weight) is torch.nn.Parameter and type(linear.weight.data) is torch.Tensor:
                raise Refused("torchao left the weight unquantized (shape or group size not accepted)")
            modules.append(linear)
        xd = x.to(dtype)

        def run(i: int) -> torch.Tensor:
            try:
                return modules[i](xd).float()
            except Exception as exc:  # noqa: BLE001
                raise Refused(_one_line(exc)) from None

        return run

    return build


def torchao_paths() -> dict[str, Builder]:
    """Every CPU-reachable int4 / int8 path torchao offers, by config and packing format."""
    try:
        from torchao.quantization import (
            Int4WeightOnlyConfig,
            Int8DynamicActivationInt8WeightConfig,
            Int8DynamicActivationIntxWeightConfig,
            Int8WeightOnlyConfig,
            IntxWeightOnlyConfig,
        )
        from torchao.quantization.granularity import PerGroup
        from torchao.quantization.quant_primitives import MappingType
        from torchao.quantization.quantize_.workflows import Int4PackingFormat, IntxPackingFormat
    except ImportError as exc:
        print(f"skipped: torchao paths (torchao not importable: {exc})")
        return {}
    paths: dict[str, Builder] = {}
    for fmt in Int4PackingFormat:
        paths[f"torchao Int4WeightOnly {fmt.value}"] = torchao_config(
            lambda fmt=fmt: Int4WeightOnlyConfig(group_size=GROUP, int4_packing_format=fmt), torch.bfloat16
        )
    try:
        from torchao.prototype.quantization.int4 import (
            Int8DynamicActivationInt4WeightConfig,
            PrototypeInt4WeightOnlyConfig,
        )

        paths["torchao PrototypeInt4WeightOnly (opaque)"] = torchao_config(
            lambda: PrototypeInt4WeightOnlyConfig(group_size=GROUP), torch.bfloat16
        )
        paths["torchao Int8DynActInt4 (da8w4)"] = torchao_config(
            lambda: Int8DynamicActivationInt4WeightConfig(group_size=GROUP), torch.float32
        )
    except ImportError as exc:
        print(f"skipped: torchao prototype int4 configs ({exc})")
    for fmt in IntxPackingFormat:
        paths[f"torchao Int8DynActIntx {fmt.value}"] = torchao_config(
            lambda fmt=fmt: Int8DynamicActivationIntxWeightConfig(
                weight_dtype=torch.int4,
                weight_granularity=PerGroup(GROUP),
                weight_mapping_type=MappingType.ASYMMETRIC,
                intx_packing_format=fmt,
            ),
            torch.float32,
        )
        paths[f"torchao IntxWeightOnly {fmt.value}"] = torchao_config(
            lambda fmt=fmt: IntxWeightOnlyConfig(
                weight_dtype=torch.int4,
                granularity=PerGroup(GROUP),
                mapping_type=MappingType.ASYMMETRIC,
                intx_packing_format=fmt,
            ),
            torch.float32,
        )
    paths["torchao Int8WeightOnly"] = torchao_config(Int8WeightOnlyConfig, torch.float32)
    paths["torchao Int8DynActInt8"] = torchao_config(Int8DynamicActivationInt8WeightConfig, torch.float32)
    return paths


# ---- onnxruntime (optional) ----


def ort_matmul_nbits(bits: int, accuracy: int, zero_points: str) -> Builder:
    """One graph of ``MatMulNBits`` nodes (one per layer, ``bits``-bit blocks of :data:`GROUP`, ``accuracy_level``
    ``accuracy``: 4 quantizes activations to int8, 0 keeps float32), all on the same input.

    ``zero_points``: ``"float"`` stores Q4_1's minimum exactly as ``w = (q - zp) * d`` with ``zp = -m / d``;
    ``"u8"`` rounds it to the 4-bit integer the int8 kernels want; ``"sums"`` keeps Q4_1 exact on the integer
    kernels: zero point 0 (``w = q * d``) plus ``blocksums(x) @ m.T`` (each block's input sum times its minimum,
    a float32 product 32x smaller; llama.cpp's Q4_1 x Q8_1 dot does the same); 8-bit (the Q8_0 head) uses zero
    point 128."""

    def build(weights: list[torch.Tensor], x: torch.Tensor, threads: int) -> Run:
        try:
            import numpy as np
            import onnxruntime as ort
            from onnx import TensorProto, helper
        except ImportError as exc:
            raise Refused(f"onnxruntime/onnx not importable ({exc})") from None
        out, width = weights[0].shape
        initializers, nodes, outputs = [], [], []
        if zero_points == "sums":
            initializers += [
                helper.make_tensor("blocks", TensorProto.INT64, [3], [-1, width // GROUP, GROUP]),
                helper.make_tensor("last", TensorProto.INT64, [1], [-1]),
            ]
            nodes += [
                helper.make_node("Reshape", ["A", "blocks"], ["A3"]),
                helper.make_node("ReduceSum", ["A3", "last"], ["Asum"], keepdims=0),
            ]
        for i, w in enumerate(weights):
            blob, scale, zp = _nbits_blocks(w, bits, zero_points)
            names = [f"B{i}", f"S{i}", f"Z{i}"]
            initializers += [
                helper.make_tensor(names[0], TensorProto.UINT8, blob.shape, blob.numpy().tobytes(), raw=True),
                helper.make_tensor(names[1], TensorProto.FLOAT, scale.shape, scale.numpy().tobytes(), raw=True),
                helper.make_tensor(
                    names[2],
                    TensorProto.FLOAT if zp.dtype == torch.float32 else TensorProto.UINT8,
                    zp.shape,
                    zp.numpy().tobytes(),
                    raw=True,
                ),
            ]
            product = f"P{i}" if zero_points == "sums" else f"Y{i}"
            nodes.append(
                helper.make_node(
                    "MatMulNBits", ["A", *names], [product], domain="com.microsoft",
                    K=width, N=out, bits=bits, block_size=GROUP, accuracy_level=accuracy,
                )
            )  # fmt: skip
            if zero_points == "sums":
                minima = quantize_q4(w)[2].T.contiguous()  # [in / GROUP, out]
                initializers.append(
                    helper.make_tensor(f"M{i}", TensorProto.FLOAT, minima.shape, minima.numpy().tobytes(), raw=True)
                )
                nodes += [
                    helper.make_node("MatMul", ["Asum", f"M{i}"], [f"C{i}"]),
                    helper.make_node("Add", [product, f"C{i}"], [f"Y{i}"]),
                ]
            outputs.append(helper.make_tensor_value_info(f"Y{i}", TensorProto.FLOAT, [x.shape[0], out]))
        graph = helper.make_graph(
            nodes, "nbits", [helper.make_tensor_value_info("A", TensorProto.FLOAT, list(x.shape))], outputs,
            initializer=initializers,
        )  # fmt: skip
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
        )
        try:
            session = ort.InferenceSession(
                model.SerializeToString(), _ort_options(threads), providers=["CPUExecutionProvider"]
            )
            a = x.numpy()
            session.run(None, {"A": a})
        except Exception as exc:  # noqa: BLE001
            raise Refused(_one_line(exc)) from None
        cached: dict[str, Any] = {}

        def run(i: int) -> torch.Tensor:
            if i == 0 or "all" not in cached:  # one graph run computes every layer's product
                cached["all"] = session.run(None, {"A": a})
            return torch.from_numpy(np.asarray(cached["all"][i]))

        run.graph_calls = len(weights)  # type: ignore[attr-defined]
        return run

    return build


def _nbits_blocks(weight: torch.Tensor, bits: int, zero_points: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(``B`` uint8 [out, blocks, GROUP * bits / 8], ``scales`` float32 [out * blocks], zero points) for
    ``MatMulNBits``: the exact blocks of ``weight`` (Q4_1 for 4 bits, Q8_0 for 8), nibbles low first."""
    out, width = weight.shape
    blocks = width // GROUP
    if bits == 8:
        q, d = q8_blocks(weight)
        u = (q.to(torch.int32) + 128).to(torch.uint8).reshape(out, blocks, GROUP)
        return u, d.reshape(-1).contiguous(), torch.full((out * blocks,), 128, dtype=torch.uint8)
    q, d, m = quantize_q4(weight)
    if zero_points == "sums":  # w = q * d here; the minima are added by the graph
        pairs = q.reshape(out, blocks, GROUP // 2, 2).to(torch.uint8)
        zeros = torch.zeros(out * ((blocks + 1) // 2), dtype=torch.uint8)
        return (pairs[..., 0] | (pairs[..., 1] << 4)).contiguous(), d.reshape(-1).contiguous(), zeros
    flat = d == 0  # a constant group: w = m for every weight, written as q = 15, d = m / 15, zp = 0
    q = torch.where(flat.repeat_interleave(GROUP, dim=1), torch.full_like(q, 15), q)
    d = torch.where(flat, m / 15, d)
    zp = torch.where(flat, torch.zeros_like(m), -m / torch.where(flat, 1, d))
    pairs = q.reshape(out, blocks, GROUP // 2, 2).to(torch.uint8)
    blob = (pairs[..., 0] | (pairs[..., 1] << 4)).contiguous()
    if zero_points == "float":
        return blob, d.reshape(-1).contiguous(), zp.reshape(-1).contiguous()
    zq = zp.round().clamp(0, 15).to(torch.uint8)
    if blocks % 2:
        zq = torch.cat([zq, torch.zeros(out, 1, dtype=torch.uint8)], dim=1)
    zq = zq.reshape(out, -1, 2)
    return blob, d.reshape(-1).contiguous(), (zq[..., 0] | (zq[..., 1] << 4)).reshape(-1).contiguous()


def _ort_options(threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.log_severity_level = 3
    return options


def ort_overhead(x: torch.Tensor, threads: int, calls: int = 200) -> str:
    """The µs of one ``session.run`` of a one-node ``Identity`` graph on ``x``: the Python-call overhead."""
    try:
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return ""
    info = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Identity", ["A"], ["Y"])], "id",
        [info("A", TensorProto.FLOAT, list(x.shape))], [info("Y", TensorProto.FLOAT, list(x.shape))],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    session = ort.InferenceSession(model.SerializeToString(), _ort_options(threads), providers=["CPUExecutionProvider"])
    a = x.numpy()
    plain = _median_us(lambda: session.run(None, {"A": a}), calls)
    binding = session.io_binding()
    binding.bind_cpu_input("A", a)
    binding.bind_output("Y", "cpu")
    bound = _median_us(lambda: session.run_with_iobinding(binding), calls)
    return f"onnxruntime Python-call overhead (Identity graph): run {plain:.1f} µs, run_with_iobinding {bound:.1f} µs"


def _median_us(fn: Callable[[], Any], calls: int) -> float:
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


# ---- timing ----


def linear_paths() -> dict[str, Builder]:
    paths: dict[str, Builder] = {
        TODAY: torch_int4,
        "fp32 F.linear": fp32_linear,
        "bf16 F.linear": half_linear(torch.bfloat16),
    }
    paths.update({k: v for k, v in torchao_paths().items() if "Int8" not in k or "Int4" in k or "Intx" in k})
    paths.update(_ort_paths(bits=4))
    return paths


def head_paths() -> dict[str, Builder]:
    paths: dict[str, Builder] = {
        "fp32 x @ W.T (today)": fp32_linear,
        "fp32 x @ Wt (W stored transposed)": fp32_transposed,
        "bf16 F.linear": half_linear(torch.bfloat16),
        "fp16 F.linear": half_linear(torch.float16),
        "torch _weight_int8pack_mm fp32": torch_int8_channel(torch.float32),
        "torch _weight_int8pack_mm bf16": torch_int8_channel(torch.bfloat16),
        "torch int4 bf16 (rounds Q8_0 to 4 bits)": torch_int4,
    }
    paths.update(
        {k: v for k, v in torchao_paths().items() if k in ("torchao Int8WeightOnly", "torchao Int8DynActInt8")}
    )
    paths.update(_ort_paths(bits=8))
    return paths


def _ort_paths(bits: int) -> dict[str, Builder]:
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        print(f"skipped: onnxruntime MatMulNBits ({exc})")
        return {}
    if bits == 8:
        return {f"ort MatMulNBits 8-bit acc{level}": ort_matmul_nbits(8, level, "u8") for level in (4, 0)}
    return {
        "ort MatMulNBits acc4 zp-u8 (rounds m)": ort_matmul_nbits(4, 4, "u8"),
        "ort MatMulNBits acc4 zp-float": ort_matmul_nbits(4, 4, "float"),
        "ort MatMulNBits acc4 zp0 + blocksums@m": ort_matmul_nbits(4, 4, "sums"),
        "ort MatMulNBits acc0 zp0 + blocksums@m": ort_matmul_nbits(4, 0, "sums"),
        "ort MatMulNBits acc0 zp-u8 (rounds m)": ort_matmul_nbits(4, 0, "u8"),
        "ort MatMulNBits acc0 zp-float": ort_matmul_nbits(4, 0, "float"),
    }


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text[:200]}"


def sweep_us(run: Run, layers: int) -> tuple[float, float]:
    """(wall, CPU) µs per call over one pass through every layer's weight (an ONNX graph run counts as ``layers``
    calls). CPU time is the process's, all threads: on a shared machine it is the steadier of the two."""
    start, cpu = time.perf_counter(), time.process_time()
    for i in range(layers):
        run(i)
    return (time.perf_counter() - start) / layers * 1e6, (time.process_time() - cpu) / layers * 1e6


@dataclass
class Row:
    shape: str
    path: str
    us: float
    """Median wall µs per call."""
    cpu: float
    """Median CPU µs per call (all threads)."""
    error: float


def measure(shape: Shape, paths: dict[str, Builder], rows: int, threads: int, rounds: int) -> Iterator[Row]:
    """Builds every path for ``shape``, checks it against the float64 product, then times interleaved rounds."""
    torch.manual_seed(rows)
    x = torch.randn(rows, shape.weights[0].shape[1])
    refs = [(x.double() @ w.double().T) for w in shape.weights]
    ready: dict[str, tuple[Run, float]] = {}
    for name, build in paths.items():
        try:
            run = build(shape.weights, x, threads)
            error = max(float((run(i).double() - ref).abs().max() / ref.abs().max()) for i, ref in enumerate(refs))
        except Refused as exc:
            print(f"  {shape.name} {name}: refused here: {exc}")
            continue
        ready[name] = (run, error)
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in ready}
    with torch.inference_mode():
        for _ in range(rounds + 1):  # the first round warms up and is dropped
            for name, (run, _) in ready.items():
                samples[name].append(sweep_us(run, len(shape.weights)))
    for name, (_, error) in ready.items():
        kept = samples[name][1:]
        yield Row(shape.name, name, statistics.median(w for w, _ in kept), statistics.median(c for _, c in kept), error)


def print_table(rows: list[Row], today: dict[str, float]) -> None:
    print(f"  {'shape':<18} {'path':<44} {'wall µs':>9} {'cpu µs':>9} {'vs today':>9} {'max rel err':>12}")
    for row in rows:
        base = today.get(row.shape)
        ratio = f"{base / row.us:.2f}x" if base else "-"
        print(f"  {row.shape:<18} {row.path:<44} {row.us:>9.1f} {row.cpu:>9.1f} {ratio:>9} {row.error:>12.2e}")


EXACT_ENOUGH = 1e-2
"""Largest relative error a head path may have to count as "best head" (bf16 rounding is ~4e-3)."""


def print_step(linear_rows: list[Row], head_rows: list[Row], linears: list[Shape]) -> None:
    """One decode step's matmuls per path, wall (CPU) ms: every linear shape times its calls a step, plus
    today's head and the fastest head path within :data:`EXACT_ENOUGH`."""
    per_path: dict[str, dict[str, Row]] = {}
    for row in linear_rows:
        per_path.setdefault(row.path, {})[row.shape] = row
    steps = {
        path: (sum(got[s.name].us * s.per_step for s in linears) / 1000,
               sum(got[s.name].cpu * s.per_step for s in linears) / 1000)
        for path, got in per_path.items()
        if all(s.name in got for s in linears)
    }  # fmt: skip
    today = next((r for r in head_rows if r.path.startswith("fp32 x @ W.T")), None)
    exact = [r for r in head_rows if r.error < EXACT_ENOUGH]
    best = min(exact, key=lambda r: r.cpu) if exact else None
    calls = sum(s.per_step for s in linears)
    print(f"  decode step's matmuls, wall (cpu) ms: {calls} linears + head; best head = {best.path if best else '-'}")
    for path, (wall, cpu) in sorted(steps.items(), key=lambda kv: kv[1][1]):
        line = f"    {path:<44} linears {wall:6.2f} ({cpu:6.2f})"
        for label, head in (("+ today's head", today), ("+ best head", best)):
            if head:
                line += f"; {label} {wall + head.us / 1000:6.2f} ({cpu + head.cpu / 1000:6.2f})"
        print(line)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rows", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--layers", type=int, default=30, help="layers whose weights each timing cycles through")
    parser.add_argument("--skip", nargs="*", default=[], help="paths to leave out (substring of the name)")
    args = parser.parse_args(argv)
    linears, head = load_shapes(args.layers)
    lpaths = {k: v for k, v in linear_paths().items() if not any(s in k for s in args.skip)}
    hpaths = {k: v for k, v in head_paths().items() if not any(s in k for s in args.skip)}
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}, "
          f"{len(linears[0].weights)} layers cycled, {args.rounds} interleaved rounds, medians; "
          f"load_avg_1m={os.getloadavg()[0]:.1f}")  # fmt: skip
    for threads in args.threads:
        torch.set_num_threads(threads)
        for rows in args.rows:
            print(f"\nthreads={threads} rows={rows} (load {os.getloadavg()[0]:.1f})")
            overhead = ort_overhead(torch.zeros(rows, 576), threads)
            if overhead:
                print(f"  {overhead}")
            linear_rows = [r for shape in linears for r in measure(shape, lpaths, rows, threads, args.rounds)]
            head_rows = list(measure(head, hpaths, rows, threads, args.rounds))
            today = {r.shape: r.us for r in linear_rows if r.path == TODAY}
            today.update({r.shape: r.us for r in head_rows if r.path.startswith("fp32 x @ W.T")})
            print_table(linear_rows + head_rows, today)
            print_step(linear_rows, head_rows, linears)
            print(f"  (load now {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
