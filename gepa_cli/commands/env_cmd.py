"""`prime env list|init|install`."""

from __future__ import annotations

from pathlib import Path

import typer

from gepa_cli.errors import user_errors

app = typer.Typer(
    help="List, create and install environments.\n\nIds resolve in this order: `./environments/<id>/`, "
    "an installed module, the built-ins.",
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
    from evalkit.env_catalog import list_environments

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
    from evalkit.env_scaffold import init_environment

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
    path: Path = typer.Argument(..., help="Folder of an environment package (has a pyproject.toml)."),
    no_build_isolation: bool = typer.Option(
        False, "--no-build-isolation", help="Build with the installed setuptools (needed offline)."
    ),
) -> None:
    """Install a local environment package (editable) into this Python, so its id works anywhere.

    Runs `python -m pip install -e PATH` with the interpreter running prime.

    Examples:

        prime env install ./environments/my_env

        prime env install ./environments/my_env --no-build-isolation
    """
    from evalkit.env_install import install_environment

    module = install_environment(path, no_build_isolation=no_build_isolation)
    print(f"installed {path} (module {module}); run it from any folder with `prime eval run {module.replace('_', '-')}`")
