"""The eval engine: configs, the runner, results I/O with resume, summaries and reports.

Entry point: :func:`evalkit.eval.runner.run_eval` (or ``arun_eval`` inside an event loop).
"""
