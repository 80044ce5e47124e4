"""docs/driver-authors.md is executable: every code block comes from a file the test suite
runs under the same gates as the rest, every command is run here or checked, and every
number the guide states ("what it took", what an author reads, how big the runtime is) is
computed here.

- A python, yaml, toml or dockerfile block starts with `# <path>` or `# <path>#<part>`
  and the rest equals that file, or the part of it: a top-level function, class or
  assignment of a Python file, a region between `# [start:<name>]` and `# [end:<name>]`,
  or lines `L<first>-L<last>`. Other blocks are `sh` commands.
- The sources are simdra's own code and tests (ruff, mypy strict, the layer contracts,
  pytest) or the examples (the crypto driver, the partitionable accel kind), which
  tests/test_example_driver.py holds to the same.
- `SIMDRA_UPDATE_GUIDE=1 python -m pytest tests/test_driver_author_guide.py` copies the
  sources into the blocks and the computed numbers into the text; the diff is then for a
  person to read.
"""

from __future__ import annotations

import ast
import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.test_example_driver import MAX_LINES

REPO = Path(__file__).resolve().parent.parent
GUIDE = REPO / "docs" / "driver-authors.md"
EXAMPLE = REPO / "docs" / "examples" / "crypto-driver"
ACCEL = REPO / "docs" / "examples" / "accel-kind"
UPDATE = os.environ.get("SIMDRA_UPDATE_GUIDE") == "1"
READ_BUDGET = 1_500  # lines an author reads: the public API and this guide (issue 29)
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SOURCED = ("python", "yaml", "toml", "dockerfile")
MARKER = re.compile(r"^# ([\w./-]+?)(?:#(\S+))?$")
# Where a block's source may live: code under simdra's own gates, or the examples, which
# tests/test_example_driver.py runs with ruff, mypy --strict and an import check (their
# tests run from the guide's commands).
GATED = ("driver/", "simdra/", "tests/", "docs/examples/crypto-driver/",
         "docs/examples/accel-kind/")
NOT_EXAMPLE_FILES = ("__pycache__", ".pytest_cache", ".mypy_cache", ".ruff_cache")


# --- the blocks --------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    language: str
    text: str  # between the fences, first line included

    @property
    def source(self) -> tuple[str, str]:
        """(path, part) the first line names; ('', '') without a marker."""
        match = MARKER.match(self.text.split("\n", 1)[0])
        return (match[1], match[2] or "") if match else ("", "")

    @property
    def body(self) -> str:
        return self.text.split("\n", 1)[1] if "\n" in self.text else ""

    def id(self) -> str:
        path, part = self.source
        return f"{path}#{part}" if part else path or self.text[:40]


def guide_blocks() -> list[Block]:
    return [Block(m[1], m[2]) for m in FENCE.finditer(GUIDE.read_text())]


def source_text(path: str, part: str) -> str:
    """The file, or the part of it, that a block must equal."""
    text = (REPO / path).read_text()
    if not part:
        return text
    lines = text.splitlines(keepends=True)
    if span := re.fullmatch(r"L(\d+)-L(\d+)", part):
        return "".join(lines[int(span[1]) - 1:int(span[2])])
    if f"# [start:{part}]" in text:
        start = next(i for i, line in enumerate(lines) if line.strip() == f"# [start:{part}]")
        end = next(i for i, line in enumerate(lines) if line.strip() == f"# [end:{part}]")
        return "".join(lines[start + 1:end])
    for node in ast.parse(text).body:
        if part in _defined_names(node):
            first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
            return "".join(lines[first - 1:node.end_lineno])
    raise LookupError(f"{path} has no top-level {part}, region {part} or line range")


def _defined_names(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.ClassDef):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else (
        [node.target] if isinstance(node, ast.AnnAssign) else [])
    return {t.id for t in targets if isinstance(t, ast.Name)}


def sourced_blocks() -> list[Block]:
    return [b for b in guide_blocks() if b.language in SOURCED]


def test_every_block_is_a_command_or_names_its_source() -> None:
    blocks = guide_blocks()
    assert len(sourced_blocks()) >= 8 and any(b.language == "sh" for b in blocks)

    for block in blocks:
        assert block.language in (*SOURCED, "sh"), f"a {block.language or 'plain'} block: " \
            f"{block.id()!r}; show code from a file the tests run, or a command"
        if block.language != "sh":
            path, _ = block.source
            assert path, f"the {block.language} block {block.id()!r} names no source file"
            assert path.startswith(GATED), f"{path} is not under the test suite's gates"
            assert (REPO / path).is_file(), path


def test_every_sourced_block_equals_its_source() -> None:
    differ = [b.id() for b in sourced_blocks() if b.body != source_text(*b.source)]

    assert differ == [], "blocks that differ from their sources; regenerate with " \
        "SIMDRA_UPDATE_GUIDE=1"


def test_a_part_is_a_symbol_a_region_or_a_line_range(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "m.py").write_text("import os\n\n\n@dec\ndef f():\n    pass\n\n\nX = 1\n"
                                   "# [start:two]\na = 2\n# [end:two]\n")
    monkeypatch.setattr(sys.modules[__name__], "REPO", tmp_path)

    assert source_text("m.py", "f") == "@dec\ndef f():\n    pass\n"
    assert source_text("m.py", "X") == "X = 1\n"
    assert source_text("m.py", "two") == "a = 2\n"
    assert source_text("m.py", "L1-L2") == "import os\n\n"
    with pytest.raises(LookupError):
        source_text("m.py", "missing")


def test_the_example_is_shown_whole_and_is_what_tests_test_example_driver_checks() -> None:
    shown = {path for b in sourced_blocks() for path, part in [b.source] if not part}
    example = {f"docs/examples/crypto-driver/{p}" for p in example_files()
               if not p.endswith(".md")}  # code, not its notes

    assert example <= shown, f"example files the guide does not show: {example - shown}"
    checked = (REPO / "tests" / "test_example_driver.py").read_text()
    assert '"docs" / "examples" / "crypto-driver"' in checked


def test_the_partitions_walkthrough_shows_its_kind_and_runs_its_test() -> None:
    shown = {b.source for b in sourced_blocks()}
    module = str((ACCEL / "accel_kind.py").relative_to(REPO))
    tests = str((ACCEL / "tests").relative_to(REPO))

    assert (module, "") in shown, "the walkthrough shows the kind whole"
    assert any(c.words[:3] == ["python", "-m", "pytest"] and tests in c.words
               for c in guide_commands()), "no command of the guide runs its test"


# --- the commands ------------------------------------------------------------------


@dataclass(frozen=True)
class Command:
    env: dict[str, str]
    words: list[str]

    def id(self) -> str:
        return " ".join(self.words)[:70]


def guide_commands() -> list[Command]:
    """Each line of each `sh` block (continuations joined), its VAR=value words apart.
    A `pip install <dir>` stands for the commands after it in its block: they get the
    directory on PYTHONPATH, as if installed."""
    commands = []
    for block in guide_blocks():
        if block.language != "sh":
            continue
        installed: list[str] = []
        for line in block.text.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            env = {"PYTHONPATH": ":".join(installed)} if installed else {}
            while words and re.match(r"^[A-Z_]+=", words[0]):
                key, _, value = words.pop(0).partition("=")
                env[key] = value
            if words[:2] == ["pip", "install"]:
                installed += [w for w in words[2:] if not w.startswith("-")]
            if words:
                commands.append(Command(env, words))
    return commands


def _run(command: Command, argv: list[str]) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(str(REPO / p) for p in command.env.get("PYTHONPATH", "").split(":")
                           if p)
    env = {**os.environ, **command.env,
           "PYTHONPATH": os.pathsep.join(p for p in (path, str(REPO)) if p)}
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def _console_script(name: str) -> list[str]:
    """argv that runs a console script as installed."""
    module, _, function = _script_target(name).partition(":")
    return [sys.executable, "-c", f"import sys, {module}; sys.exit({module}.{function}())"]


# The console script's own code path, but `run` validates its flags into the plugin's
# Config and prints it instead of starting the plugin.
DRY_RUN = """
import importlib, json, sys
import simdra._driver.cli.run as run

def dry_run(args):
    config = run.config_from_args(args)
    print(json.dumps({"driver": config.driver_name, "kinds": list(config.kinds),
                      "backend": config.device_backend}))
    return 0

run.handle = dry_run
module, _, function = sys.argv[1].partition(":")
sys.exit(getattr(importlib.import_module(module), function)(sys.argv[2:]))
"""


def _script_target(name: str) -> str:
    """`module:function` of a console script: simdra's, or one the example declares."""
    if name == "simdra":
        return "simdra._driver.cli:main"
    return str(tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]["scripts"]
               [name])


def _parses(command: Command) -> None:
    """A long-running `run`: its flags parse into the plugin's configuration."""
    words = command.words

    done = _run(command, [sys.executable, "-c", DRY_RUN, _script_target(words[0]), *words[1:]])

    assert done.returncode == 0, f"{command.id()}: {done.stderr[-2000:]}"
    config = json.loads(done.stdout)
    if "--driver-name" in words:
        assert config["driver"] == words[words.index("--driver-name") + 1]
    for value in (words[i + 1] for i, w in enumerate(words) if w == "--kind"):
        assert value in config["kinds"]


def _helm_renders(command: Command) -> None:
    from tests.deploy.helm import run_helm

    words = command.words
    for path in (words[3], *(words[i + 1] for i, w in enumerate(words) if w == "-f")):
        assert (REPO / path).exists(), path
    done = run_helm("template", *words[2:])

    assert done.returncode == 0, done.stderr
    rendered = [o for o in yaml.safe_load_all(done.stdout) if o]
    assert "DaemonSet" in {o["kind"] for o in rendered}
    # The e2e installs the same release with the same values on a real node.
    e2e = (REPO / "tests/e2e/node_scenarios/test_two_drivers.py").read_text()
    assert f'RELEASE = "{words[2]}"' in e2e and words[words.index("-f") + 1] in e2e


def _image_is_built_by_the_e2e(command: Command) -> None:
    words = command.words
    dockerfile = words[words.index("-f") + 1]
    assert (REPO / dockerfile).is_file() and words[-1] == "."
    # tests/e2e/images.sh builds that Dockerfile with the repository as its context.
    images = (REPO / "tests/e2e/images.sh").read_text()
    assert f'-f "$repo/{dockerfile}"' in images


def _done_by_the_e2e(command: Command) -> None:
    e2e = (REPO / "tests/e2e/node_scenarios/test_two_drivers.py").read_text()
    for word in command.words[1:]:
        assert f'"{word}"' in e2e, f"{command.id()}: the e2e does not do {word!r}"


def _installable(command: Command) -> None:
    (path,) = [w for w in command.words[2:] if not w.startswith("-")]
    assert (REPO / path / "pyproject.toml").is_file(), path


def _runs(command: Command) -> None:
    words = command.words
    if words[:3] == ["python", "-m", "pytest"]:
        paths = [w for w in words[3:] if not w.startswith("-")]
        if all(p.startswith("tests/") for p in paths):  # the suite runs them anyway
            assert all((REPO / p).exists() for p in paths), paths
            return
        argv = [sys.executable, "-m", "pytest", *words[3:], "-q", "-p", "no:cacheprovider"]
    else:
        argv = [*_console_script(words[0]), *words[1:]]

    done = _run(command, argv)

    assert done.returncode == 0, f"{command.id()}: {done.stdout[-2000:]}{done.stderr[-2000:]}"
    assert done.stdout.strip()
    if words[1:2] == ["deviceclasses"]:  # the classes the example's chart values create
        values = yaml.safe_load((EXAMPLE / "values.yaml").read_text())
        for entry in values["deviceClasses"]["classes"]:
            assert f"name: {entry['type']}.{values['driverName']}\n" in done.stdout


def check_for(command: Command) -> Callable[[Command], None]:
    """How the suite keeps a command of the guide true."""
    words = command.words
    if words[1:2] == ["run"] and words[0] in ("simdra", *_example_scripts()):
        return _parses
    if words[0] in ("simdra", *_example_scripts()) or words[:3] == ["python", "-m", "pytest"]:
        return _runs
    if words[:2] == ["helm", "install"]:
        return _helm_renders
    if words[:2] == ["docker", "build"]:
        return _image_is_built_by_the_e2e
    if words[:2] in (["kubectl", "create"], ["kubectl", "label"]):
        return _done_by_the_e2e
    if words[:2] == ["pip", "install"]:
        return _installable
    raise AssertionError(f"{command.id()}: neither run nor checked by this test")


def _example_scripts() -> tuple[str, ...]:
    project = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["project"]
    return tuple(project.get("scripts", {}))


@pytest.mark.slow
@pytest.mark.parametrize("command", guide_commands(), ids=Command.id)
def test_the_command_works(command: Command) -> None:
    check_for(command)(command)


def test_every_command_is_run_or_checked() -> None:
    commands = guide_commands()
    checks = {check_for(c) for c in commands}

    assert {_parses, _runs, _helm_renders, _image_is_built_by_the_e2e} <= checks


# --- the numbers -------------------------------------------------------------------


def example_files() -> dict[str, int]:
    """The example's files (relative paths) and their lines."""
    return {str(p.relative_to(EXAMPLE)): len(p.read_text().splitlines())
            for p in sorted(EXAMPLE.rglob("*"))
            if p.is_file() and not any(part in NOT_EXAMPLE_FILES or part.endswith(
                (".egg-info", ".pyc")) for part in p.relative_to(EXAMPLE).parts)}


def own_python_lines() -> int:
    return sum(n for p, n in example_files().items()
               if p.endswith(".py") and not p.startswith("tests/"))


def _python_lines(root: Path) -> tuple[int, int]:
    files = list(root.rglob("*.py"))
    return len(files), sum(len(p.read_text().splitlines()) for p in files)


def _example_names() -> tuple[str, ...]:
    """What would name the example in a file of simdra: package, release, driver name."""
    values = yaml.safe_load((EXAMPLE / "values.yaml").read_text())
    packages = tomllib.loads((EXAMPLE / "pyproject.toml").read_text())["tool"]["setuptools"]
    return (*packages["packages"], values["name"], values["driverName"],
            str(EXAMPLE.relative_to(REPO)))


def code_naming_the_example(path: Path, names: tuple[str, ...]) -> int:
    """Lines of a file of simdra that name the example, docstrings and comments aside."""
    if path.suffix != ".py":
        return sum(1 for line in path.read_text().splitlines()
                   if not line.lstrip().startswith("#") and any(n in line for n in names))
    tree = ast.parse(path.read_text())
    docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                  if isinstance(n, ast.Module | ast.ClassDef | ast.FunctionDef)
                  and n.body and isinstance(n.body[0], ast.Expr)}
    lines = {n.lineno for n in ast.walk(tree)
             if (isinstance(n, ast.Constant) and isinstance(n.value, str)
                 and id(n) not in docstrings and any(x in n.value for x in names))
             or (isinstance(n, ast.Name) and any(x in n.id for x in names))
             or (isinstance(n, ast.alias) and any(x in n.name for x in names))}
    return len(lines)


def simdra_touched() -> tuple[int, dict[str, int]]:
    """(files of simdra's code that name the example, {other file: lines}) outside the
    example, the docs and the tests."""
    names = _example_names()
    code = [p for root in ("simdra",) for p in (REPO / root).rglob("*.py")]
    touched = sum(1 for p in code if code_naming_the_example(p, names))
    others = [REPO / n for n in ("Dockerfile", ".dockerignore", "pyproject.toml")]
    others += [p for root in ("deploy", "hack") for p in (REPO / root).rglob("*")
               if p.is_file() and p.suffix in ("", ".sh", ".yaml", ".yml", ".tpl", ".json")]
    lines = {str(p.relative_to(REPO)): n for p in others
             if (n := code_naming_the_example(p, names))}
    return touched, lines


def test_the_search_for_the_example_skips_docstrings_and_comments(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text('"""crypto_driver in a docstring."""\n# crypto_driver\n'
                      'import crypto_driver\nKIND = "crypto_driver:CryptoKind"\n')
    ignore = tmp_path / ".dockerignore"
    ignore.write_text("# crypto_driver\n!docs/crypto_driver/\n")

    assert code_naming_the_example(source, ("crypto_driver",)) == 2
    assert code_naming_the_example(ignore, ("crypto_driver",)) == 1


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _count(value: int) -> str:
    return f"{value:,}"


@dataclass(frozen=True)
class Fact:
    """A number the guide states: where (a pattern, one group a number) and its value."""

    pattern: str
    value: Callable[[], int | float]
    tolerance: float = 0.0  # relative: for the runtime, which every change moves

    @property
    def regex(self) -> re.Pattern[str]:
        """The pattern with each space matching any run of white space (line wraps)."""
        return re.compile(self.pattern.replace(" ", r"\s+"))

    def stated(self, text: str) -> str:
        match = self.regex.search(text)
        assert match, f"the guide does not state {self.pattern!r}"
        return match[1]

    def render(self) -> str:
        value = self.value()
        return f"{value:.1f}" if isinstance(value, float) else _count(value)


def _read_lines() -> tuple[int, int]:
    api = sum(len(p.read_text().splitlines()) for p in (REPO / "simdra").glob("*.py"))
    return api, len(GUIDE.read_text().splitlines())


FACTS = (
    Fact(r"`simdra/\*\.py`, ([\d,]+) lines\)", lambda: _read_lines()[0]),
    Fact(r"this guide \(([\d,]+) lines\)", lambda: _read_lines()[1]),
    Fact(r"([\d,]+) lines in all", lambda: sum(_read_lines())),
    Fact(r"about ([\d.]+)k lines of Python",
         lambda: round(_python_lines(REPO / "simdra/_driver")[1] / 1000
                       - _python_lines(REPO / "simdra/_driver/testing")[1] / 1000, 1), 0.1),
    Fact(r"k lines of Python in ([\d,]+) files",
         lambda: _python_lines(REPO / "simdra/_driver")[0]
         - _python_lines(REPO / "simdra/_driver/testing")[0],
         0.1),
    Fact(r"the harness, `simdra/_driver/testing/`, another ([\d.]+)k",
         lambda: round(_python_lines(REPO / "simdra/_driver/testing")[1] / 1000, 1), 0.1),
    Fact(r"own Python is ([\d,]+) lines", own_python_lines),
    Fact(r"([\d,]+) files? of simdra's code", lambda: simdra_touched()[0]),
)


def _update_facts(text: str) -> str:
    for fact in FACTS:
        text = fact.regex.sub(lambda m, f=fact: m[0].replace(m[1], f.render()), text, count=1)
    files = example_files()
    return re.sub(r"^\| `([^`]+)` \| (\d+) \|",
                  lambda m: f"| `{m[1]}` | {files.get(m[1], m[2])} |", text, flags=re.M)


def _update_blocks(text: str) -> str:
    def fill(match: re.Match[str]) -> str:
        block = Block(match[1], match[2])
        if block.language not in SOURCED or not block.source[0]:
            return match[0]
        first = block.text.split("\n", 1)[0]
        return f"```{block.language}\n{first}\n{source_text(*block.source)}```"

    return FENCE.sub(fill, text)


@pytest.fixture(scope="module", autouse=True)
def _update_the_guide() -> None:
    """SIMDRA_UPDATE_GUIDE=1: the blocks from their sources, then the numbers (the
    guide's own length last: blocks change it)."""
    if UPDATE:
        GUIDE.write_text(_update_facts(_update_blocks(GUIDE.read_text())))
        GUIDE.write_text(_update_facts(GUIDE.read_text()))


@pytest.mark.parametrize("fact", FACTS, ids=lambda f: f.pattern[:40])
def test_the_guide_states_the_computed_number(fact: Fact) -> None:
    stated, value = float(fact.stated(GUIDE.read_text()).replace(",", "")), fact.value()

    assert abs(stated - value) <= fact.tolerance * value, (
        f"the guide says {stated} for {fact.pattern!r}, it is {value}; "
        "regenerate with SIMDRA_UPDATE_GUIDE=1")


def test_what_an_author_reads_stays_within_the_budget() -> None:
    api, guide = _read_lines()

    assert api + guide <= READ_BUDGET, f"{api} + {guide} lines to read"


def what_it_took() -> str:
    text = GUIDE.read_text()
    start = text.index("### What it took")
    return text[start:text.index("\n#", start + 1)]


def test_what_it_took_lists_every_file_of_the_example_with_its_lines() -> None:
    table = {m[1]: _number(m[2])
             for m in re.finditer(r"^\| `([^`]+)` \| (\d+) \|", what_it_took(), re.M)}

    assert table == example_files()
    assert f"at most {MAX_LINES}" in what_it_took()
    assert own_python_lines() <= MAX_LINES


def test_nothing_of_simdra_names_the_example_but_its_build_context() -> None:
    code, others = simdra_touched()
    took = " ".join(what_it_took().split())

    assert code == 0, "simdra's own code names the example driver"
    for path, lines in others.items():
        assert f"{lines} line{'s' * (lines != 1)} of `{path}`" in took, (path, lines)


def test_the_env_the_guide_promises_is_what_the_example_test_asserts() -> None:
    text = GUIDE.read_text()
    test = (EXAMPLE / "tests" / "test_crypto_driver.py").read_text()
    promised = set(re.findall(r"`SIMDRA_DEVICE_<ID>_([A-Z_]+)", text))

    assert len(promised) >= 4
    assert {key for key in promised if f'"{key}"' not in test} == set()


def env_table() -> dict[str, str]:
    """The keys the guide's table under "The env of a device" lists, with their text."""
    text = GUIDE.read_text()
    start = text.index("### The env of a device")
    section = text[start:text.index("\n#", start + 1)]
    return dict(re.findall(r"^\| `([A-Z_]+)` \| (.+) \|$", section, re.M))


def test_the_guide_lists_every_env_key_the_plugin_reserves() -> None:
    """Every key of RESERVED_ENV_KEYS (what `env_attributes` may not use: the plugin sets
    it for every device it prepares) has its line in the guide, and no other key does."""
    from simdra._driver.devices.kind_registry import RESERVED_ENV_KEYS

    listed = env_table()

    assert set(listed) == set(RESERVED_ENV_KEYS)
    assert all(meaning.strip() for meaning in listed.values())
    section = " ".join(GUIDE.read_text().split("### The env of a device")[1].split())
    assert "`CAPACITY_`" in section and "`CAPACITY_<CAP>_VALUE`" in section


def test_the_guide_names_no_private_module_for_an_author_to_import() -> None:
    text = GUIDE.read_text()
    example_code = [b.body for b in sourced_blocks()
                    if b.source[0].startswith("docs/examples/")]

    assert "simdra/_driver/devices/examples" not in text
    assert "`simdra._driver` is private" in " ".join(text.split())
    assert not any(re.search(r"^\s*(from|import) driver\b", code, re.M)
                   for code in example_code)
