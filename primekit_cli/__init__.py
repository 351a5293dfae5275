"""The ``prime`` command line: thin typer commands over evalkit, gepa_cli and rl_backend."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("primekit")
except PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+local"
