"""What is checked of a shell example that is not run: `bash -n` accepts it; each program it
names exists (a project script, a module of the repository, a program on this machine, or one of
the few that `ELSEWHERE` names); `cortex-workers` accepts its subcommand and options as
written; the project's scripts and modules list each option it uses in their `--help`; the
repository paths it names exist; and the Compose services and Kubernetes objects it names are
those of compose.yaml and deploy/kubernetes."""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import yaml
from docs_examples.shell_blocks import ROOT, ShellBlock, simple_commands

from cortex_workers.cli import build_parser

VENV_BIN = Path(sys.executable).parent
ELSEWHERE = {
    "kubectl": "the client of a Kubernetes cluster (docs/kubernetes.md)",
    "docker": "Docker with its Compose plugin (docs/operations.md)",
}
"""Programs an example may name that the test machine need not have, and where they come from."""
BUILTINS = frozenset({"cd", "export", "source", ".", "set", "declare", "echo", "printf", "test"})
PYTHONS = frozenset({"python", "python3", ".venv/bin/python", ".venv/bin/python3"})


def check_block(block: ShellBlock) -> list[str]:
    """What is wrong with the block as written (nothing: an empty list)."""
    text = block.commands()
    syntax = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    if syntax.returncode != 0:
        return [f"bash -n: {syntax.stderr.strip()}"]
    problems: list[str] = []
    cwd = ROOT
    for words in simple_commands(text):
        if words[0] == "cd" and len(words) == 2:
            cwd = cwd / words[1]
            if not cwd.is_dir():
                problems.append(f"cd {words[1]}: no such directory")
            continue
        problems += [f"{' '.join(words[:4])}: {p}" for p in _check_command(words, cwd)]
    return problems


def _check_command(words: list[str], cwd: Path) -> list[str]:
    program, args = words[0], words[1:]
    if program == "kubectl":
        return _check_kubectl(args, cwd)
    # what `mkdir` makes, and the target of `cp` / `mv`, need not exist
    made = {"mkdir": len(args), "cp": 1, "mv": 1}.get(program, 0)
    problems = _missing_paths(args[: len(args) - made], cwd)
    if program == "cortex-workers":
        return problems + _cortex_workers_accepts(args)
    if program in PYTHONS and args[:1] == ["-m"] and len(args) > 1:
        return problems + _check_module(args[1], args[2:])
    if "/" in program:
        return problems + _check_script(cwd / program, args)
    problems += _installed(program)
    if program == "docker":
        problems += _check_compose(args)
    return problems


def _check_module(module: str, args: list[str]) -> list[str]:
    """`python -m MODULE ARGS` of a module of the repository."""
    path = ROOT / module.replace(".", "/")
    if not (path.with_suffix(".py").exists() or (path / "__main__.py").exists()):
        return [f"no module {module} in the repository"]
    return _listed_in_help((sys.executable, "-m", module), args)


def _check_script(path: Path, args: list[str]) -> list[str]:
    """A script of the repository (`scripts/test` takes pytest's arguments)."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        return [f"{path.relative_to(ROOT)}: no such executable in the repository"]
    if path == ROOT / "scripts" / "test":
        return _listed_in_help((sys.executable, "-m", "pytest"), args, subcommands=False)
    return _listed_in_help((str(path),), args)


def _check_kubectl(args: list[str], cwd: Path) -> list[str]:
    """`-k` and `-f` name paths, KIND/NAME an object of deploy/kubernetes, and what follows
    `--` runs in a container."""
    paths = [v for flag, v in zip(args, args[1:], strict=False) if flag in ("-k", "-f")]
    inside = args[args.index("--") + 1 :] if "--" in args else []
    return (
        _installed("kubectl")
        + _missing_paths(paths, cwd)
        + _kubernetes_objects_exist(args)
        + _inside(inside)
    )


def _check_compose(args: list[str]) -> list[str]:
    """The services `docker compose` names are compose.yaml's; what `exec` runs is checked."""
    problems = _compose_services_exist(args)
    if args[1:2] == ["exec"]:
        service = next(i for i, a in enumerate(args) if i > 1 and not a.startswith("-"))
        problems += _inside(args[service + 1 :])
    return problems


def _inside(command: list[str]) -> list[str]:
    """A command run in a container: checked when it is `cortex-workers`."""
    return _cortex_workers_accepts(command[1:]) if command[:1] == ["cortex-workers"] else []


def _installed(program: str) -> list[str]:
    if program in BUILTINS or shutil.which(program, path=_path()) is not None:
        return []
    if program in ELSEWHERE:
        return []
    return [f"{program}: not installed, and not among the programs of ELSEWHERE"]


def _path() -> str:
    return f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"


def _cortex_workers_accepts(args: list[str]) -> list[str]:
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            build_parser().parse_args(args)
    except SystemExit as exit_:
        if exit_.code not in (0, None):
            return [f"cortex-workers refuses it: {err.getvalue().strip().splitlines()[-1]}"]
    return []


@cache
def _help(argv: tuple[str, ...]) -> str | None:
    """The program's `--help`, or None when it has none (it fails on `--help`)."""
    run = subprocess.run(
        [*argv, "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    return run.stdout if run.returncode == 0 else None


def _listed_in_help(
    argv: tuple[str, ...], args: list[str], *, subcommands: bool = True
) -> list[str]:
    """Each option of `args` (and each leading word, as a subcommand or a choice of a
    positional) appears in the program's `--help`."""
    options = [a.split("=", 1)[0] for a in args if re.fullmatch(r"--?[A-Za-z][\w.-]*(=.*)?", a)]
    if not options and not (subcommands and args and not args[0].startswith("-")):
        return []  # nothing to check against the help: do not run it
    text = _help(argv)
    if text is None:  # no options to offer: only arguments (files), which are not checked
        return [f"{argv[-1]} has no --help, so {options} cannot be checked"] if options else []
    problems = [f"{o} is not an option of {argv[-1]}" for o in options if not _mentions(text, o)]
    if subcommands and args and not args[0].startswith("-"):
        choices = {c for group in re.findall(r"\{([\w,-]+)\}", text) for c in group.split(",")}
        if choices and args[0] not in choices:
            problems.append(f"{args[0]} is not a subcommand of {argv[-1]} ({sorted(choices)})")
    return problems


def _mentions(help_text: str, option: str) -> bool:
    return re.search(rf"(?<![\w-]){re.escape(option)}(?![\w-])", help_text) is not None


def _missing_paths(args: list[str], cwd: Path) -> list[str]:
    """Repository paths among the arguments (`deploy/kubernetes`, `tests/x.py::name`,
    `--config.file=prometheus.yml`): those whose first part exists must exist whole."""
    problems = []
    for arg in args:
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        path, _, name = value.partition("::")
        first = path.split("/", 1)[0]
        if (
            any(c.isspace() for c in path)
            or not first
            or first.startswith(("-", "$"))
            or not (cwd / first).exists()
        ):
            continue
        if not (cwd / path).exists():
            problems.append(f"{path}: no such file or directory")
        elif name and not re.search(rf"^def {re.escape(name)}\(", (cwd / path).read_text(), re.M):
            problems.append(f"{path} has no test {name}")
    return problems


@cache
def _compose_services() -> frozenset[str]:
    return frozenset(yaml.safe_load((ROOT / "compose.yaml").read_text())["services"])


def _compose_services_exist(args: list[str]) -> list[str]:
    if args[:1] != ["compose"]:
        return ["only `docker compose` is checked"]
    named = [a.split("=", 1)[0] for a in args if "=" in a and not a.startswith("-")]
    rest = [a for a in args[1:] if not a.startswith("-")]
    if rest[:1] in (["exec"], ["logs"]) and len(rest) > 1:
        named.append(rest[1])
    services = _compose_services()
    return [f"compose.yaml has no service {n}" for n in named if n not in services]


@cache
def _kubernetes_names() -> frozenset[tuple[str, str]]:
    found = set()
    for manifest in (ROOT / "deploy" / "kubernetes").glob("*.yaml"):
        for doc in yaml.safe_load_all(manifest.read_text()):
            if isinstance(doc, dict) and "name" in doc.get("metadata", {}):
                found.add((str(doc["kind"]).lower(), str(doc["metadata"]["name"])))
    return frozenset(found)


_KINDS = {"deploy": "deployment", "deployment": "deployment", "job": "job", "svc": "service"}


def _kubernetes_objects_exist(args: list[str]) -> list[str]:
    problems = []
    for before, arg in zip(["", *args], args, strict=False):
        if before in ("-k", "-f"):
            continue
        kind, slash, name = arg.partition("/")
        if slash and kind in _KINDS and (_KINDS[kind], name) not in _kubernetes_names():
            problems.append(f"deploy/kubernetes has no {_KINDS[kind]} {name}")
    return problems
