"""Environments, rubrics, parsers, model clients, the embedded engine and the eval runner."""
