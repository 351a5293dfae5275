"""The environment API (verifiers-shaped): environments, rubrics, parsers."""

from evalkit.envs.base import Environment, SingleTurnEnv
from evalkit.envs.multiturn import MultiTurnEnv
from evalkit.envs.parsers import Parser, ThinkParser, XMLParser
from evalkit.envs.rubric import Rubric, fast_reward
from evalkit.envs.tool_env import ToolEnv
from evalkit.envs.tools import tool_schema

__all__ = [
    "Environment",
    "SingleTurnEnv",
    "MultiTurnEnv",
    "ToolEnv",
    "Rubric",
    "fast_reward",
    "Parser",
    "XMLParser",
    "ThinkParser",
    "tool_schema",
]
