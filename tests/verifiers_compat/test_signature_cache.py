"""The remembered ``inspect.signature`` that verifiers' legacy rollout and rubric use once wrapped."""

import inspect

import pytest

from evalkit.verifiers_compat import signature_cache


def test_a_functions_signature_is_worked_out_once():
    def reward(completion, answer, **kwargs):
        return 1.0

    first = signature_cache.signature(reward)
    assert first == inspect.signature(reward)
    assert signature_cache.signature(reward) is first  # remembered, not recomputed


def test_unhashable_and_signatureless_callables_behave_as_inspect_says():
    class Unhashable:
        __hash__ = None

        def __call__(self, state):
            return 0.0

    assert list(signature_cache.signature(Unhashable()).parameters) == ["state"]
    with pytest.raises(TypeError):
        signature_cache.signature(42)


@pytest.mark.verifiers
def test_install_points_verifiers_legacy_modules_at_the_remembering_inspect():
    pytest.importorskip("verifiers.legacy", reason="needs verifiers' legacy API (0.3.x)")
    import verifiers.legacy.rubrics.rubric as rubric_module
    import verifiers.legacy.utils.async_utils as async_utils

    signature_cache.install()
    for module in (rubric_module, async_utils):
        assert module.inspect.signature is signature_cache.signature
        assert module.inspect.Parameter is inspect.Parameter  # the rest is the real module


def test_install_gives_pydantic_the_remembering_signature_and_pydantic_reads_factories_the_same():
    from pydantic._internal import _fields, _typing_extra

    signature_cache.install()
    assert _typing_extra.signature is signature_cache.signature
    assert _fields.takes_validated_data_argument(list) is False  # a builtin: parsed from its text signature once
    assert _fields.takes_validated_data_argument(lambda data: dict(data)) is True
