"""GEPA tracking through gepa's own W&B / MLflow integration: what reaches the tracker, what never does.

wandb is an optional extra and not installed in the test venv; a recording stand-in module named
``wandb`` (every call gepa's tracker makes, kept in a list) shows what gepa sends through it. The refusals
(package missing, credentials in a URI) need nothing installed.
"""

from __future__ import annotations

import importlib.machinery
import sys
import types

import pytest
from support.gepa_job import config, run

from evalkit.core.errors import UserError

SECRET = "sk-test-SECRET-4242"


class Recorder(types.ModuleType):
    """A ``wandb`` module that records calls instead of sending them."""

    def __init__(self):
        super().__init__("wandb")
        self.__spec__ = importlib.machinery.ModuleSpec("wandb", None)
        self.calls: list[tuple[str, object]] = []
        self.run = None
        recorder = self

        class Config:
            def update(self, values, allow_val_change=False):
                recorder.calls.append(("config", dict(values)))

        self.config = Config()
        self.Table = lambda columns, data: ("table", columns, data)
        self.Html = lambda html: ("html", html)

    def login(self, key=None, verify=False):
        self.calls.append(("login", key))

    def init(self, **kwargs):
        self.calls.append(("init", kwargs))
        self.run = types.SimpleNamespace(summary={})

    def define_metric(self, *args, **kwargs):
        self.calls.append(("define_metric", args))

    def log(self, values, step=None, commit=True):
        self.calls.append(("log", dict(values)))

    def finish(self):
        self.calls.append(("finish", dict(self.run.summary)))
        self.run = None


def test_wandb_gets_the_run_through_gepa_and_no_secret(tmp_path, monkeypatch):
    recorder = Recorder()
    monkeypatch.setitem(sys.modules, "wandb", recorder)
    monkeypatch.setenv("MY_KEY_VAR", SECRET)
    cfg = config(tmp_path, max_calls=40, api_key_var="MY_KEY_VAR", base_url="http://user:pw@127.0.0.1:9/v1",
                 wandb={"project": "gepa-tests", "tags": ["t"]})
    outcome, _, _ = run(cfg)
    kinds = [kind for kind, _ in recorder.calls]
    init = dict(recorder.calls[kinds.index("init")][1])
    assert init["project"] == "gepa-tests" and init["name"] == "run" and init["tags"] == ["t"]
    assert init["config"]["max_metric_calls"] == 40 and init["config"]["candidate_selection_strategy"] == "pareto"
    logged = [values for kind, values in recorder.calls if kind == "log"]
    assert any("val_program_average" in key or "best" in key for values in logged for key in values)
    assert kinds[-1] == "finish" and recorder.calls[kinds.index("login")][1] is None  # no key passed
    sent = repr(recorder.calls)
    assert SECRET not in sent and "MY_KEY_VAR" not in sent and "user:pw" not in sent
    assert outcome.best_val_score == 1.0


def test_missing_tracker_package_is_refused_before_anything_is_written(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "mlflow", None)  # an import of it fails, as when it is not installed
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "mlflow" else real(name, *a))
    with pytest.raises(UserError, match=r"needs the mlflow package: pip install 'primekit\[mlflow\]'"):
        run(config(tmp_path, mlflow={"experiment_name": "x"}))
    assert not (tmp_path / "run").exists()


def test_tracking_uri_with_credentials_is_refused(tmp_path):
    with pytest.raises(Exception, match="holds credentials; set MLFLOW_TRACKING_USERNAME"):
        config(tmp_path, mlflow={"tracking_uri": "https://me:hunter2@mlflow.example.com"})


def test_wandb_project_flag_sets_the_table(monkeypatch):
    import importlib.util

    from typer.testing import CliRunner

    from primekit_cli.app import app

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a))
    result = CliRunner().invoke(app, ["gepa", "run", "arithmetic", "--dry-run", "--wandb-project", "p"])
    assert result.exit_code == 2 and "error: [wandb] tracking needs the wandb package" in result.output
