"""ToolEnv whose reward reads the tool-calling reply's ``content`` (the shape of environments that check
``message["content"] is None`` before parsing): verifiers 0.3.1 keeps ``None`` for an assistant message that
only calls tools, and sends it back as ``content: null`` on the next request."""

import verifiers as vf
from datasets import Dataset


def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: The key to look up.
    """
    return key.upper()


def load_environment(num_examples: int = 3):
    dataset = Dataset.from_list([{"question": f"Look up item {i} with the tool.", "answer": str(i)}
                                 for i in range(num_examples)])

    def calls_without_text(completion) -> float:
        """1.0 when the first assistant message only calls tools (its content is None, not "")."""
        first = next((m for m in completion if m["role"] == "assistant"), None)
        return 1.0 if first is not None and first["content"] is None and first["tool_calls"] else 0.0

    return vf.ToolEnv(dataset=dataset, tools=[lookup], rubric=vf.Rubric(funcs=[calls_without_text]), max_turns=3)
