"""``bench/engine.py --vs-llama-cpp``: its options parse, a missing llama-cpp-python is one line and exit 2
(before any model loads), and, where llama-cpp-python is installed, a short comparison runs end to end."""

from __future__ import annotations

import subprocess
import sys

import pytest
from support import REPO, bench_module, with_pythonpath

BENCH = REPO / "bench" / "engine.py"


def _run_bench(*args: str, hide_llama_cpp: bool = False, timeout: float = 120) -> subprocess.CompletedProcess:
    """The bench as a real process; ``hide_llama_cpp`` makes ``import llama_cpp`` fail there (a ``None`` entry in
    ``sys.modules`` is how Python marks a module unimportable), so the test holds where it is installed too."""
    hide = "import sys; sys.modules['llama_cpp'] = None; " if hide_llama_cpp else "import sys; "
    run = f"import runpy; runpy.run_path({str(BENCH)!r}, run_name='__main__')"
    code = f"{hide}sys.argv = ['engine.py', *sys.argv[1:]]; {run}"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=timeout,
        cwd=REPO, env=with_pythonpath(REPO),
    )  # fmt: skip


def test_the_option_parses_and_passes_the_dtype_through():
    bench = bench_module(BENCH)
    args = bench._arguments(["--vs-llama-cpp", "--dtype", "q4", "--threads-to-try", "1,2", "--concurrency", "1,8"])
    assert (args.vs_llama_cpp, args.dtype, args.threads_to_try, args.levels, args.rounds) == (
        True, "q4", [1, 2], [1, 8], 3,
    )  # fmt: skip
    plain = bench._arguments([])
    assert (plain.vs_llama_cpp, plain.dtype, plain.threads_to_try, plain.levels, plain.rounds) == (
        False, "auto", [1, 2], None, 2,
    )  # fmt: skip


def test_bad_thread_counts_are_a_usage_error():
    result = _run_bench("--vs-llama-cpp", "--threads-to-try", "one,two")
    assert result.returncode == 2
    assert "--threads-to-try and --concurrency take comma-separated whole numbers" in result.stderr


def test_a_missing_llama_cpp_is_one_line_and_exit_2():
    result = _run_bench("--vs-llama-cpp", "--dtype", "q4", hide_llama_cpp=True)
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("error: --vs-llama-cpp needs llama-cpp-python")
    assert "pip install 'primekit[bench-llama]'" in lines[0]


@pytest.mark.slow
def test_a_short_comparison_runs_where_llama_cpp_is_installed():
    pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (the bench-llama extra)")
    from evalkit.core.defaults import DEFAULT_MODEL
    from evalkit.model.registry import KNOWN_MODELS

    if KNOWN_MODELS[DEFAULT_MODEL].gguf_path() is None:
        pytest.skip("the embedded model's GGUF file is not installed")
    result = _run_bench(
        "--vs-llama-cpp", "--concurrency", "1,2", "--rounds", "1", "--tokens", "4", "--threads-to-try", "1",
        timeout=600,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
    assert "llama.cpp path: ggml-cpu" in result.stdout
    assert "c= 1  decode tok/s: primekit" in result.stdout
    assert "c= 2  tok/s: primekit" in result.stdout
