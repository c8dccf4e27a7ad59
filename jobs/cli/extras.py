"""What a command needs beyond `make preview`'s ./venv, and the one line that says how to get it.

`make preview` installs the program's own dependencies (requirements.txt); the jobs CLI's Ray
client, TensorBoard reader and matplotlib are requirements-cli.txt, installed by `make cli` (and
by `make setup`). A command that imports one of them without it ends with this line, not with a
ModuleNotFoundError.
"""

from __future__ import annotations

# The top-level modules of requirements-cli.txt -> what the user reads they are for.
CLI_MODULES = {
    "ray": "Ray's Job Submission client (ray[default])",
    "tensorboard": "the TensorBoard event-file reader (tensorboard)",
    "matplotlib": "matplotlib, for the plots",
}
INSTALL_COMMAND = "make cli"


def not_installed(module: str, what: str) -> str | None:
    """The same line, before any work, when ``module`` of requirements-cli.txt is not installed."""
    import importlib.util

    if importlib.util.find_spec(module) is not None:
        return None
    return missing_cli_module(ModuleNotFoundError(name=module), what)


def missing_cli_module(exc: ModuleNotFoundError, what: str) -> str | None:
    """The line to print when ``what`` (a command, as typed) failed to import a module of
    requirements-cli.txt; None for any other missing module (that one is a bug)."""
    top = (exc.name or "").split(".")[0]
    needed = CLI_MODULES.get(top)
    if needed is None:
        return None
    return (f"{what} needs {needed}, which `make preview` does not install: run `{INSTALL_COMMAND}` "
            "in the repository (requirements-cli.txt into ./venv)")
