"""`prime env list|init|install|check`."""

from __future__ import annotations

from pathlib import Path

import typer

from primekit_cli.errors import user_errors

app = typer.Typer(
    help="List, create and install environments.\n\nIds resolve as verifiers resolves them: an installed "
    "module, then `./environments/<id>/`, then primekit's built-ins. Environments written for verifiers "
    "(`import verifiers as vf`, or v1 `import verifiers.v1 as vf`) run unchanged with the `verifiers` extra.",
    no_args_is_help=True,
    rich_markup_mode="markdown",
)


@app.command("list")
@user_errors
def list_envs(
    environments_dir: Path = typer.Option(Path("environments"), "--dir", help="Folder of local environments."),
) -> None:
    """List local, installed and built-in environments: id, origin, description.

    Examples:

        prime env list

        prime env list --dir ../my-project/environments
    """
    from evalkit.loading.catalog import list_environments

    envs = list_environments(environments_dir)
    width = max(len(e.env_id) for e in envs)
    for env in envs:
        print(f"{env.env_id:<{width}}  {env.origin:<9}  {env.description}")


@app.command("init")
@user_errors
def init(
    name: str = typer.Argument(..., help="Environment id, e.g. my-env (folder environments/my_env/)."),
    environments_dir: Path = typer.Option(Path("environments"), "--dir", help="Where to create it."),
) -> None:
    """Create a working environment from the template; `prime eval run NAME` runs it at once.

    Writes `<dir>/<name_with_underscores>/` with the module (`load_environment`), a
    pyproject.toml and a README. Never overwrites an existing folder.

    Examples:

        prime env init my-env

        prime eval run my-env -n 5 -r 3
    """
    from evalkit.loading.scaffold import init_environment

    folder, warnings = init_environment(name, environments_dir)
    for warning in warnings:
        print(f"warning: {warning}")
    print(f"created {folder}/")
    for file in sorted(folder.iterdir()):
        print(f"  {file.name}")
    print(f"next: edit {folder / (folder.name + '.py')}, then `prime eval run {name} -n 5 -r 3`")


@app.command("install")
@user_errors
def install(
    target: str = typer.Argument(
        ...,
        help="A folder with a pyproject.toml, a name under ./environments/, a package name, "
        "or an Environments Hub id owner/name[@version].",
    ),
    no_build_isolation: bool = typer.Option(
        False, "--no-build-isolation", help="Build a folder with the installed setuptools (needed offline)."
    ),
    environments_dir: Path = typer.Option(Path("environments"), "--dir", help="Folder of local environments."),
) -> None:
    """Install an environment into this Python, so its id works from any folder.

    A folder (or a name found under ./environments/) is installed editable; a package name is installed
    with pip; a Hub id owner/name[@version] adds the Hub's package index for that owner. Runs
    `python -m pip install ...` with the interpreter running prime (pip's PIP_* variables apply).

    Examples:

        prime env install ./environments/my_env

        prime env install my-env                    # ./environments/my_env if it exists, else the package

        prime env install primeintellect/reverse-text@0.1.0
    """
    from evalkit.loading.install import install_environment

    module = install_environment(target, no_build_isolation=no_build_isolation, environments_dir=environments_dir)
    print(
        f"installed {target} (module {module}); run it from any folder with `prime eval run {module.replace('_', '-')}`"
    )


@app.command("check")
@user_errors
def check(
    env_id: str = typer.Argument(..., help="Environment id or path, as `prime eval run` takes it."),
    env_args: str = typer.Option(None, "--env-args", "-a", help="Environment args as JSON."),
    num_examples: int = typer.Option(8, "--num-examples", "-n", min=1, help="Examples the scripted policies play."),
    reward_range: tuple[float, float] = typer.Option(
        (0.0, 1.0),
        "--range",
        help="Declared reward range LOW HIGH: the gold answer should reach HIGH, degenerate replies LOW.",
    ),
    model: str = typer.Option(
        None,
        "--model",
        "-m",
        help="Also measure the RL rules of thumb on this model "
        "(local/smollm2-135m is the embedded one; any `prime eval run -m` value).",
    ),
    no_model: bool = typer.Option(False, "--no-model", help="Scripted policies only (no model at all)."),
    rollouts_per_example: int = typer.Option(
        4, "--rollouts-per-example", "-r", min=2, help="Model rollouts per example."
    ),
    environments_dir: Path = typer.Option(Path("environments"), "--dir", help="Folder of local environments."),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON (for CI)."),
) -> None:
    """Is this environment's reward honest? Scripted policies (gold, empty, echo, format-only, adversarial)
    and the embedded model, offline; exit 1 when a check fails.

    Checks: the gold answer scores the top of the range; degenerate and adversarial replies score the
    floor; scoring is deterministic, finite, within the range, and leaves its inputs unchanged; on a model
    (the embedded one unless `--no-model`), the baseline mean, never/always-solved shares and reward spread
    within groups against the RL baseline gate's thresholds. See docs/env-check.md.

    Examples:

        prime env check reverse-text

        prime env check ./environments/my_env --no-model --json

        prime env check my-env -m gpt-4.1-mini --range 0 1.2
    """
    from rich.console import Console

    from evalkit.core.defaults import DEFAULT_MODEL
    from evalkit.core.errors import UserError
    from evalkit.envcheck.render import print_report
    from evalkit.envcheck.run import EnvCheckOptions, check_environment
    from evalkit.loading.resolve import parse_env_args

    if model is not None and no_model:
        raise UserError("give --model or --no-model, not both")
    options = EnvCheckOptions(
        env_id=env_id, env_args=parse_env_args(env_args), num_examples=num_examples, reward_range=reward_range,
        model=None if no_model else (model or DEFAULT_MODEL), rollouts_per_example=rollouts_per_example,
        environments_dir=environments_dir,
    )
    report = check_environment(options)
    print_report(report, Console(soft_wrap=as_json), as_json=as_json)
    if report.failed:
        raise typer.Exit(code=1)
