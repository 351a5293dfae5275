"""`prime env list|init|install`."""

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
    target: str = typer.Argument(..., help="A folder with a pyproject.toml, a name under ./environments/, a package name, or an Environments Hub id owner/name[@version]."),
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
    print(f"installed {target} (module {module}); run it from any folder with `prime eval run {module.replace('_', '-')}`")
