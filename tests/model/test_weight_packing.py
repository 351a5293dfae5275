"""When the engine prepacks CPU linears (weights.packing_pays), and that a snapshot never aliases the master."""

from __future__ import annotations

import pytest
import torch

from evalkit.model import dtypes, weights
from evalkit.model.dtypes import CpuInfo


@pytest.fixture
def cpu(monkeypatch):
    """Set the CPU the packing rule sees; the rule's cache is cleared around each use."""

    def use(flags: set[str], isa: str | None) -> None:
        monkeypatch.setattr(dtypes, "cpu_info", lambda: CpuInfo("AVX512", frozenset(flags), isa))
        weights._onednn_avx512.cache_clear()

    yield use
    weights._onednn_avx512.cache_clear()


def test_fp32_is_packed_only_where_onednn_runs_avx512(cpu):
    if not weights._packing_works(torch.float32):
        pytest.skip("this torch build cannot pack linears")
    cpu({"avx2", "avx512f"}, None)
    assert weights.packing_pays(torch.float32, "cpu")
    cpu({"avx2", "avx512f"}, "AVX2")
    assert not weights.packing_pays(torch.float32, "cpu")
    cpu({"avx2"}, None)
    assert not weights.packing_pays(torch.float32, "cpu")
    assert weights.packing_pays(torch.bfloat16, "cpu") == weights._packing_works(torch.bfloat16)
    assert not weights.packing_pays(torch.float32, "meta")


@pytest.mark.parametrize("isa", [None, "AVX2"])
def test_a_borrowed_weight_is_copied_packed_or_not(cpu, isa):
    cpu({"avx2", "avx512f"}, isa)
    master = torch.randn(48, 64)
    x = torch.randn(3, 64)
    linear = weights.Linear(master, owned=False)
    before = linear(x)
    master.mul_(2)
    assert torch.equal(linear(x), before)
