"""Read the Dockerfile and .dockerignore the way `docker build` does, for the few
instructions simdra's image uses, and replay a build stage without a Docker engine.

Replaying means: lay the stage's COPY'd build-context files out under a scratch
directory that stands for the container's `/`, then run its RUN lines with bash, with
the stage's ARG/ENV values (absolute paths moved under the scratch root) in the
environment and `python` resolving to the interpreter running the tests.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

_VARIABLE = re.compile(r"\$(?:\{(?P<braced>\w+)\}|(?P<plain>\w+))")
_FLAG = re.compile(r"^--(?P<name>[\w-]+)=(?P<value>\S*)$")


class DockerfileError(Exception):
    """The Dockerfile uses an instruction or form the replay cannot reproduce."""


@dataclass(frozen=True)
class Instruction:
    """One instruction: upper-case keyword, its raw arguments, and its --flags."""

    keyword: str
    arguments: str
    flags: Mapping[str, str] = field(default_factory=dict)


@dataclass
class Stage:
    """One `FROM` block with its variables resolved as `docker build` would."""

    base_image: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)
    variables: dict[str, str] = field(default_factory=dict)  # ARG and ENV, in order

    def all(self, keyword: str) -> list[Instruction]:
        """The stage's instructions with this keyword, in order."""
        return [i for i in self.instructions if i.keyword == keyword]


@dataclass(frozen=True)
class Dockerfile:
    """Global ARGs and the stages, in file order."""

    global_args: Mapping[str, str]
    stages: list[Stage]

    def stage(self, name: str) -> Stage:
        """The stage called `name` (`FROM ... AS name`)."""
        for stage in self.stages:
            if stage.name == name:
                return stage
        raise DockerfileError(f"no build stage named {name!r}")


def logical_lines(text: str) -> list[str]:
    """Instruction lines with comments dropped and `\\` continuations joined."""
    lines: list[str] = []
    current = ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if stripped.startswith("#") or (not stripped and not current):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append((current + stripped).strip())
        current = ""
    if current.strip():
        lines.append(current.strip())
    return lines


def expand(text: str, variables: Mapping[str, str]) -> str:
    """`$NAME` and `${NAME}` substitution; unknown names expand to nothing, like Docker."""
    return _VARIABLE.sub(lambda m: variables.get(m["braced"] or m["plain"], ""), text)


def parse_dockerfile(text: str) -> Dockerfile:
    """Parse FROM/ARG/ENV/WORKDIR/COPY/RUN/LABEL/USER/ENTRYPOINT lines into stages."""
    global_args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in logical_lines(text):
        keyword, _, rest = line.partition(" ")
        keyword = keyword.upper()
        flags, arguments = _split_flags(rest.strip())
        if keyword == "FROM":
            stages.append(_new_stage(arguments, global_args))
        elif not stages:
            if keyword != "ARG":
                raise DockerfileError(f"only ARG may come before the first FROM: {line!r}")
            name, value = _assignment(arguments)
            global_args[name] = value or ""
        else:
            stage = stages[-1]
            stage.instructions.append(Instruction(keyword, arguments, flags))
            track_variables(stage.variables, keyword, arguments, global_args)
    return Dockerfile(global_args=global_args, stages=stages)


def _split_flags(rest: str) -> tuple[dict[str, str], str]:
    flags: dict[str, str] = {}
    words = rest.split(" ")
    while words and (match := _FLAG.match(words[0])):
        flags[match["name"]] = match["value"]
        words.pop(0)
    return flags, " ".join(words).strip()


def _new_stage(arguments: str, global_args: Mapping[str, str]) -> Stage:
    words = arguments.split()
    name = words[2] if len(words) == 3 and words[1].upper() == "AS" else None
    return Stage(base_image=expand(words[0], global_args), name=name)


def _assignment(text: str) -> tuple[str, str | None]:
    name, sep, value = text.partition("=")
    return name.strip(), (value.strip().strip('"') if sep else None)


def track_variables(variables: dict[str, str], keyword: str, arguments: str,
                    global_args: Mapping[str, str]) -> None:
    """Update a stage's variables for one ARG or ENV instruction (others are ignored)."""
    if keyword == "ARG":
        name, value = _assignment(arguments)
        # A stage ARG without a value inherits the global default.
        variables[name] = value if value is not None else global_args.get(name, "")
    elif keyword == "ENV":
        for word in shlex.split(arguments):
            name, _, value = word.partition("=")
            variables[name] = expand(value, variables)


def exec_form(instruction: Instruction) -> list[str]:
    """The JSON array of an exec-form ENTRYPOINT/CMD."""
    value = json.loads(instruction.arguments)
    if not isinstance(value, list):
        raise DockerfileError(f"{instruction.keyword} is not in exec form")
    return value


def copy_sources(stage: Stage) -> list[str]:
    """The build-context paths the stage's COPY lines take (not `--from` copies)."""
    sources: list[str] = []
    for instruction in stage.all("COPY"):
        if "from" not in instruction.flags:
            sources += instruction.arguments.split()[:-1]
    return sources


# -- .dockerignore


def read_dockerignore(text: str) -> list[tuple[bool, re.Pattern[str]]]:
    """(is_exception, regex) per pattern line, in order."""
    rules: list[tuple[bool, re.Pattern[str]]] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        exception = line.startswith("!")
        pattern = os.path.normpath(line.lstrip("!").strip()).lstrip("/")
        rules.append((exception, re.compile(_pattern_regex(pattern))))
    return rules


def _pattern_regex(pattern: str) -> str:
    parts = pattern.split("/")
    regex = ""
    for index, part in enumerate(parts):
        last = index == len(parts) - 1
        if part == "**":
            regex += ".*" if last else "(?:.*/)?"
        else:
            regex += _glob(part) + ("" if last else "/")
    return f"^{regex}$"


def _glob(part: str) -> str:
    """One path element of a Go filepath.Match pattern as a regex."""
    out = ""
    index = 0
    while index < len(part):
        char = part[index]
        if char == "*":
            out += "[^/]*"
        elif char == "?":
            out += "[^/]"
        elif char == "[" and (end := part.find("]", index)) > index:
            out += part[index:end + 1]  # a character class reads the same in both
            index = end
        else:
            out += re.escape(char)
        index += 1
    return out


def is_ignored(path: str, rules: Iterable[tuple[bool, re.Pattern[str]]]) -> bool:
    """Whether `docker build` leaves `path` (relative, '/'-separated) out of the context:
    the last pattern that matches the path or one of its parent directories decides."""
    candidates = [str(p) for p in reversed(PurePosixPath(path).parents) if str(p) != "."]
    candidates.append(path)
    ignored = False
    for exception, regex in rules:
        if any(regex.match(candidate) for candidate in candidates):
            ignored = not exception
    return ignored


def context_files(repo: Path, sources: Iterable[str],
                  rules: list[tuple[bool, re.Pattern[str]]]) -> list[str]:
    """The files under `sources` that reach the build context, relative to `repo`."""
    found: list[str] = []
    for source in sources:
        top = repo / source
        paths = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in paths:
            relative = path.relative_to(repo).as_posix()
            if not is_ignored(relative, rules):
                found.append(relative)
    return found


# -- replay

_LITERAL_ABSOLUTE_PATH = re.compile(r"""(?:^|[\s"'=:])(/[\w.][^\s"';&|]*)""")


def unrelocatable_paths(stage: Stage) -> list[str]:
    """Absolute paths written literally in RUN lines. The replay can only move paths that
    come from ARG/ENV variables under its scratch root; a literal one would be written on
    the machine running the tests."""
    return [match for run in stage.all("RUN")
            for match in _LITERAL_ABSOLUTE_PATH.findall(run.arguments)]


def replay_stage(dockerfile: Dockerfile, stage: Stage, repo: Path, root: Path,
                 rules: list[tuple[bool, re.Pattern[str]]], python: Path,
                 drop_env: Iterable[str] = (),
                 timeout_s: float = 600) -> subprocess.CompletedProcess[str]:
    """Run the stage's COPY and RUN lines with `root` standing for the container's `/`.

    Returns the first failing RUN's result, or the last one. `drop_env` names stage
    variables left out of the RUN environment (settings that change speed, not outcome).
    """
    if literal := unrelocatable_paths(stage):
        raise DockerfileError(f"RUN lines use literal absolute paths {literal}; use ARG/ENV")
    shims = root / ".shims"
    shims.mkdir(parents=True)
    (shims / "python").symlink_to(python)
    variables: dict[str, str] = {}
    workdir = "/"
    result = subprocess.CompletedProcess[str](args=[], returncode=0, stdout="", stderr="")
    for instruction in stage.instructions:
        track_variables(variables, instruction.keyword, instruction.arguments,
                        dockerfile.global_args)
        if instruction.keyword == "WORKDIR":
            workdir = str(PurePosixPath(workdir) / expand(instruction.arguments, variables))
            inside(root, workdir).mkdir(parents=True, exist_ok=True)
        elif instruction.keyword == "COPY" and "from" not in instruction.flags:
            _copy(instruction, variables, workdir, repo, root, rules)
        elif instruction.keyword == "RUN":
            env = _run_env(variables, root, shims, drop_env)
            result = subprocess.run(["/bin/sh", "-c", instruction.arguments],
                                    cwd=inside(root, workdir), env=env, capture_output=True,
                                    text=True, timeout=timeout_s, check=False)
            if result.returncode != 0:
                return result
    return result


def inside(root: Path, container_path: str) -> Path:
    """Where a container path lives under the scratch root."""
    return root / container_path.lstrip("/")


def _copy(instruction: Instruction, variables: Mapping[str, str], workdir: str, repo: Path,
          root: Path, rules: list[tuple[bool, re.Pattern[str]]]) -> None:
    *sources, destination = expand(instruction.arguments, variables).split()
    target = inside(root, str(PurePosixPath(workdir) / destination))
    many = len(sources) > 1 or destination.endswith("/")
    for source in sources:
        for relative in context_files(repo, [source], rules):
            inner = Path(relative).relative_to(source) if (repo / source).is_dir() else None
            if inner is not None:
                out = target / inner
            else:
                out = target / Path(relative).name if many else target
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(repo / relative, out)


def _run_env(variables: Mapping[str, str], root: Path, shims: Path,
             drop: Iterable[str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if not key.startswith("VIRTUAL_ENV")}
    for name, value in variables.items():
        if name not in drop:
            env[name] = str(inside(root, value)) if value.startswith("/") else value
    env["PATH"] = f"{shims}{os.pathsep}{env.get('PATH', '')}"
    return env
