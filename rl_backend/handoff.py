"""`prime rl run --backend prime-rl`: primekit's baseline checks, then prime-rl trains the same config.

The run dir (``<output>/rl/<run>/``, named as for primekit's own runs) gets ``config.resolved.toml``,
the baseline eval and ``baseline.json`` (as a primekit run), then ``prime-rl.toml`` (the export of
:mod:`rl_backend.export.prime_rl`, with prime-rl's outputs pointed at ``<run>/prime-rl/``) and
``launch.json`` (command, config path, start and end time, exit code). prime-rl runs as a child
process with this terminal: its progress shows as it prints it, and its exit code is this command's.

The baseline rollouts come from the eval runner's own client for ``model`` (the embedded engine or a
model in the local Hugging Face cache; a vLLM at ``inference.base_url`` when set), since the
training weights live in prime-rl, not here. Refusals of the export come before the checks, so a
config that cannot carry fails in a second, not after the baseline.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console

from evalkit.core import runs
from evalkit.core.errors import UserError
from evalkit.core.fileio import write_text_atomic
from evalkit.core.redact import redact
from rl_backend.config import RLConfig, to_toml
from rl_backend.export import prime_rl

CONFIG_NAME = "prime-rl.toml"
LAUNCH_NAME = "launch.json"
OUTPUTS_NAME = "prime-rl"
INSTALL_HINT = (
    "get prime-rl (git clone https://github.com/PrimeIntellect-ai/prime-rl, check out "
    f"{prime_rl.VERSION}, `uv sync`) and pass --prime-rl-cmd 'uv run --project PATH rl'"
)


def launch_prefix(prime_rl_cmd: str | None) -> list[str] | None:
    """The command that starts prime-rl's ``rl`` launcher: ``--prime-rl-cmd`` split like a shell
    would, else ``rl`` found on PATH, else None (not installed here)."""
    if prime_rl_cmd is not None:
        prefix = shlex.split(prime_rl_cmd)
        if not prefix:
            raise UserError(
                "--prime-rl-cmd is empty; give the command that runs prime-rl's rl, "
                "e.g. 'uv run --project ~/prime-rl rl'"
            )
        return prefix
    found = shutil.which("rl")
    return [found] if found else None


def run(config: RLConfig, *, output_dir: Path, prime_rl_cmd: str | None, skip_baseline: bool, dry_run: bool,
        console: Console) -> int:
    """Check, write, launch; returns prime-rl's exit code (0 for a dry run)."""
    from rl_backend.plan import baseline_line
    from rl_backend.runner import run_dirs

    run_dir = runs.resolve_run(run_dirs(config, output_dir), runs.ResumeRequest()).run_dir.resolve()
    config_path = run_dir / CONFIG_NAME
    exported = prime_rl.export(config, output=config_path, output_dir=run_dir, run_name=OUTPUTS_NAME)
    prefix = launch_prefix(prime_rl_cmd)
    command = [*(prefix or ["rl"]), "@", str(config_path)]
    print_notes(exported.target, exported.notes)
    if dry_run:
        if config.baseline.enabled and not skip_baseline:
            from evalkit.model.registry import resolve_model

            resolve_model(config.model)  # the checks run it here, as a real run would at its start
        _print_plan(config, run_dir, exported, command, baseline_line(config, skip_baseline), prefix is not None)
        return 0
    with runs.RunLock(run_dir):
        if (run_dir / LAUNCH_NAME).exists():
            raise UserError(
                f"run dir {run_dir} already launched prime-rl ({LAUNCH_NAME}); use another run_name or --output-dir"
            )
        write_text_atomic(run_dir / runs.RESOLVED_CONFIG, to_toml(config))
        console.print(baseline_line(config, skip_baseline), markup=False, highlight=False)
        if config.baseline.enabled and not skip_baseline:
            check_baseline(config, run_dir, console)
        for name, text in exported.extra_files.items():
            write_text_atomic(run_dir / name, text)
        write_text_atomic(config_path, exported.text)
        if prefix is None:
            raise UserError(
                f"prime-rl is not installed here (no `rl` on PATH); "
                f"the config is written to {config_path}: {INSTALL_HINT}"
            )
        return launch(command, config_path, run_dir, console)


def check_baseline(config: RLConfig, run_dir: Path, console: Console) -> dict[str, Any]:
    """primekit's baseline checks for each ``[[env]]``, through the eval runner (see the module docstring)."""
    from evalkit.eval.config import EvalConfig
    from evalkit.eval.runner import run_eval
    from evalkit.vocabulary import ConcurrencyFields, RolloutBounds, shared_fields
    from rl_backend.baseline import run_checks

    cfg = config.baseline
    rpe = config.baseline_rollouts
    sampling = {"max_tokens": config.sampling.max_tokens, "temperature": config.sampling.temperature,
                "top_p": config.sampling.top_p}

    def evaluate(spec: Any) -> Any:
        folder = runs.BASELINE_DIR if len(config.env) == 1 else f"{runs.BASELINE_DIR}/{spec.label}"
        eval_config = EvalConfig(
            env_id=spec.id,
            env_args=spec.args,
            model=config.model,
            base_url=config.inference.base_url,
            **shared_fields(config, RolloutBounds, ConcurrencyFields),
            system_prompt=config.system_prompt,
            sampling=sampling,
            shuffle=True,
            output_dir=str(run_dir),
            run_dir=str(run_dir / folder),
            split="train",
            num_examples=cfg.num_examples,
            rollouts_per_example=rpe,
            seed=config.seed + 1,
            device=config.trainer.device,
        )
        return run_eval(eval_config)

    if cfg.check:
        from rl_backend.env_check_gate import run_env_checks

        run_env_checks([(spec.label, spec.id, spec.args, None) for spec in config.env], run_dir, console)
    return run_checks(
        [(spec.label, lambda spec=spec: evaluate(spec)) for spec in config.env], cfg, rpe, run_dir, console
    )


def launch(command: list[str], config_path: Path, run_dir: Path, console: Console) -> int:
    """Run prime-rl in the foreground and record what was launched and how it ended in ``launch.json``."""
    record: dict[str, Any] = {"command": command, "config": str(config_path), "prime_rl_version": prime_rl.VERSION,
                              "started_at": _now(), "outputs": str(run_dir / OUTPUTS_NAME)}
    write_text_atomic(run_dir / LAUNCH_NAME, json.dumps(record, indent=2) + "\n")
    console.print(f"prime-rl     {shlex.join(command)}", markup=False, highlight=False, soft_wrap=True)
    try:
        code = subprocess.call(command)
    except OSError as exc:
        raise UserError(
            f"could not start prime-rl ({shlex.join(command)}): {exc.strerror or exc}; {INSTALL_HINT}"
        ) from None
    record.update(finished_at=_now(), exit_code=code)
    write_text_atomic(run_dir / LAUNCH_NAME, json.dumps(record, indent=2) + "\n")
    return code


def _print_plan(
    config: RLConfig, run_dir: Path, exported: Any, command: list[str], baseline: str, installed: bool
) -> None:
    from rl_backend.plan import algo_lines

    out = Console()
    lines = [
        "# plan (--backend prime-rl)",
        f"run dir      {run_dir}",
        f"model        {config.model}",
        *algo_lines(config),
        *(f"environment  {spec.id} {json.dumps(spec.args) if spec.args else ''}".rstrip() for spec in config.env),
        baseline + ("" if baseline.endswith("off") or "(--skip" in baseline else ", here, before prime-rl starts"),
        f"config       {run_dir / CONFIG_NAME} (prime-rl {prime_rl.VERSION})",
        f"command      {shlex.join(command)}" + ("" if installed else f"  (prime-rl not found here: {INSTALL_HINT})"),
        f"outputs      {run_dir / OUTPUTS_NAME}",
    ]
    out.print(redact("\n".join(lines)), markup=False, highlight=False, soft_wrap=True)  # env args may hold secrets
    out.print(redact(f"\n# {run_dir / CONFIG_NAME}\n" + exported.text), markup=False, highlight=False, soft_wrap=True)
    for name in exported.extra_files:
        out.print(f"# {run_dir / name} (the system prompt)", markup=False, highlight=False, soft_wrap=True)


def print_notes(target: str, notes: list[str]) -> None:
    """What did not carry, on stderr (one line per key) so stdout stays the file or the command."""
    import sys

    if notes:
        print(f"not carried to {target}:\n" + "".join(f"  - {note}\n" for note in notes), end="", file=sys.stderr)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")
