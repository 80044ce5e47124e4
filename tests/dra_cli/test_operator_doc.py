"""docs/operator.md's "Troubleshooting with kubectl dra" is executed: every `console`
block's `$ kubectl dra ...` lines run here, against the API stand-in holding the cluster
built below, and what each prints (stdout, then the one stderr line of a failure) must be
the lines under it in the page. `SIMDRA_UPDATE_DOCS=1 python -m pytest
tests/dra_cli/test_operator_doc.py` writes what they print into the page instead; the
diff is then for a person to read.

- A command may start with VAR=value words (`KUBECONFIG= kubectl dra devices`); every
  one runs with HOME an empty directory, outside a pod, and KUBECONFIG naming the
  stand-in unless it says otherwise.
- `--kubeconfig NAME` names one of KUBECONFIGS: a cluster whose RBAC refuses pods, or
  one without resource.k8s.io/v1.
- The section's `sh` block installs (`pip install simdra[extra]`, an extra the project
  declares) and its `yaml` block is the ClusterRole the commands need: exactly what
  they asked the stand-in for.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import shlex
import socket
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from simdra._driver.dra_cli.main import main
from simdra._driver.testing.apiserver import APIServer
from simdra._driver.testing.kubeconfig import write_kubeconfig
from tests.dra_cli import refusing
from tests.dra_cli.conftest import _claim, _class, _pod, _slice, populate
from tests.dra_cli.without_cel import run_without_cel

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "operator.md"
SECTION = "## Troubleshooting with kubectl dra"
UPDATE = os.environ.get("SIMDRA_UPDATE_DOCS") == "1"
FENCE = re.compile(r"^```(console|sh|yaml)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
PROMPT = "$ "
FPGA = "fpga.example.com"
# --kubeconfig NAME in the page -> the cluster it reaches: (refused plurals, DRA served)
KUBECONFIGS: dict[str, tuple[frozenset[str], bool]] = {
    "viewer.yaml": (frozenset({"pods"}), True),
    "k8s-1.33.yaml": (frozenset(), False),
}
# Granted by the page's ClusterRole though no example needs it: `why` reads the
# namespace of a claim asking for admin access (its label allows that), and lists the
# DeviceTaintRules a real cluster serves (the stand-in serves none: not found).
OPTIONAL_GRANTS = {("", "namespaces", "get"),
                   ("resource.k8s.io", "devicetaintrules", "list")}


# --- the cluster -----------------------------------------------------------------


def populate_page_cluster(server: APIServer) -> None:
    """The cluster of tests/dra_cli/conftest.py, plus what the page's stories need: the
    nodes with their hostname labels; pod ecc-check, which may run on node-1 only and
    wants gpu-3 (tainted); and on node-3 an FPGA pool of two slices of which one is
    published, wanted by pod fpga-job; pod inference, which may run on node-2 only and
    wants any GPU (part-1 is free there)."""
    for node in ("node-1", "node-2", "node-3"):
        server.put_object("nodes", {"metadata": {
            "name": node, "labels": {"kubernetes.io/hostname": node}}})
    fpgas = [{"name": f"fpga-{i}", "attributes": {"family": {"string": "agilex"}}}
             for i in range(2)]
    server.put_object("resourceslices", _slice("node-3-fpga-0", FPGA, "node-3", "node-3", fpgas,
                                               count=2))
    server.put_object("deviceclasses", _class("fpga", FPGA))
    server.put_object("resourceclaims", _claim("want-fpga", "fpga"))
    ecc = _pending(_pod("ecc-check", "want-gpu3", ""))
    ecc["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-1"}
    server.put_object("pods", ecc)
    inference = _pending(_pod("inference", "want-any", ""))
    inference["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "node-2"}
    server.put_object("pods", inference)
    server.put_object("pods", _pending(_pod("fpga-job", "want-fpga", "")))


def _pending(pod: dict[str, Any]) -> dict[str, Any]:
    del pod["spec"]["nodeName"]
    pod["status"] = {"phase": "Pending"}
    return pod


# --- the page ----------------------------------------------------------------------


def section() -> str:
    text = PAGE.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:end if end >= 0 else None]


@dataclass(frozen=True)
class Example:
    """One `$ ` line of a console block and the lines under it."""

    command: str
    output: str

    def argv(self) -> tuple[dict[str, str], list[str]]:
        """(VAR=value words, the words after `kubectl dra`)."""
        words = shlex.split(self.command)
        env = {}
        while words and re.match(r"^[A-Z_]+=", words[0]):
            key, _, value = words.pop(0).partition("=")
            env[key] = value
        assert words[:2] == ["kubectl", "dra"], f"{self.command!r} is not `kubectl dra`"
        return env, words[2:]


def examples(block: str) -> list[Example]:
    """The commands of a console block, each with its output."""
    found: list[Example] = []
    for line in block.splitlines():
        if line.startswith(PROMPT):
            found.append(Example(line[len(PROMPT):], ""))
        else:
            assert found, f"a console block starts without a command: {line!r}"
            found[-1] = Example(found[-1].command, found[-1].output + line + "\n")
    return found


def blocks(language: str) -> list[str]:
    return [m[2] for m in FENCE.finditer(section()) if m[1] == language]


def page_examples() -> list[Example]:
    return [e for block in blocks("console") for e in examples(block)]


# --- running them ------------------------------------------------------------------


@dataclass(frozen=True)
class Ran:
    status: int
    out: str
    err: str

    @property
    def shown(self) -> str:
        """What a terminal shows, as the page writes it (no trailing blanks)."""
        return "".join(line.rstrip() + "\n" for line in (self.out + self.err).splitlines())


def run_example(example: Example, kubeconfigs: dict[str, Path], home: Path) -> Ran:
    env, args = example.argv()
    args = [str(kubeconfigs[a]) if i and args[i - 1] == "--kubeconfig" else a
            for i, a in enumerate(args)]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("HOME", str(home))
        patch.setenv("KUBECONFIG", str(kubeconfigs[""]))
        patch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
        patch.delenv("NO_COLOR", raising=False)
        for key, value in env.items():
            patch.setenv(key, value)
        out, err = io.StringIO(), io.StringIO()
        status = main(args, out=out, err=err)
    return Ran(status, out.getvalue(), err.getvalue())


@dataclass(frozen=True)
class Results:
    ran: dict[str, Ran]  # by command
    asked: set[tuple[str, str, str]]  # (API group, resource, verb) the stand-in answered


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Results]:
    """Every example run once; with SIMDRA_UPDATE_DOCS=1 the page rewritten first."""
    tmp = tmp_path_factory.mktemp("page")
    with APIServer() as server, refusing.answering(
            tmp / "viewer.yaml", refuse=KUBECONFIGS["viewer.yaml"][0]) as viewer, \
            refusing.answering(tmp / "old.yaml", serves_dra=False) as old:
        populate(server)
        populate_page_cluster(server)
        kubeconfigs = {"": server.write_kubeconfig(tmp / "config"), "viewer.yaml": viewer,
                       "k8s-1.33.yaml": old}
        server.request_log.clear()
        ran = {e.command: run_example(e, kubeconfigs, tmp) for e in page_examples()}
        asked = {(_group(e.resource), e.resource, e.verb) for e in server.request_log.entries()}
    if UPDATE:
        PAGE.write_text(_rewritten(PAGE.read_text(), ran))
    yield Results(ran, asked)


def _group(resource: str) -> str:
    return "resource.k8s.io" if resource.startswith(("resource", "device")) else ""


def _rewritten(text: str, ran: dict[str, Ran]) -> str:
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    end = len(text) if end < 0 else end

    def fill(match: re.Match[str]) -> str:
        if match[1] != "console":
            return match[0]
        lines = "".join(f"{PROMPT}{e.command}\n{ran[e.command].shown}" for e in examples(match[2]))
        return f"```console\n{lines}```"

    return text[:start] + FENCE.sub(fill, text[start:end]) + text[end:]


# --- the tests ---------------------------------------------------------------------


def test_every_example_prints_what_the_page_shows(results: Results) -> None:
    differ = []
    for example in page_examples():
        shown = results.ran[example.command].shown
        if shown != example.output:
            diff = difflib.unified_diff(example.output.splitlines(), shown.splitlines(),
                                        "page", "printed", lineterm="")
            differ.append(f"$ {example.command}\n" + "\n".join(diff))
    assert not differ, "\n\n".join(differ) + "\n(SIMDRA_UPDATE_DOCS=1 rewrites the blocks)"


# What the section is for: each question has an example that answers it, and each
# failure of the tool its line. (the command starts with, what it prints includes)
STORIES = {
    "where devices are, who holds them": ("devices", "default/train -> trainer"),
    "shared capacity": ("devices --driver net.example.com", "(share) -> web-b"),
    "counters": ("devices --node node-2", "gpu-mem/memory 40Gi/80Gi"),
    "a taint": ("why ", "has taint example.com/broken=ecc:NoSchedule, not tolerated"),
    "exhausted capacity": ("why ", "bandwidth: 100G of 100G used"),
    "a selector that matches nothing": ("why ", 'model == "A100"` of request req is false'),
    "an incomplete pool": ("why ", "pool fpga.example.com/node-3 is incomplete"),
    "allocatable now": ("why ", "verdict: allocatable now"),
    "top by node": ("top", "NODE "),
    "top by driver": ("top --by driver", "DRIVER "),
    "top by class": ("top --by class", "CLASS "),
    "-o json": ("devices", '"kind": "DeviceList"'),
    "no kubeconfig": ("devices", "kubectl-dra: no kubeconfig: "),
    "no access, naming the RBAC verb": ("devices", "(RBAC verb 'list' on 'pods' refused)"),
    "no resource.k8s.io/v1": ("top", "does not serve resource.k8s.io/v1"),
}


@pytest.mark.parametrize("story", STORIES)
def test_the_section_answers(results: Results, story: str) -> None:
    starts, says = STORIES[story]
    answered = [c for c, ran in results.ran.items()
                if _args(c).startswith(starts) and says in ran.shown]
    assert answered, f"no example of the page shows {story}"


def test_an_incomplete_pools_devices_come_before_those_of_other_classes(
        results: Results) -> None:
    shown = results.ran["kubectl dra why fpga-job --max-devices 3"].shown.splitlines()
    assert [line.split(":")[0].rsplit("/", 1)[1] for line in shown[2:4]] == ["fpga-0", "fpga-1"]


def _args(command: str) -> str:
    return " ".join(Example(command, "").argv()[1])


def test_a_failure_is_one_line_on_stderr_and_status_1(results: Results) -> None:
    for command, ran in results.ran.items():
        if ran.err:
            assert (ran.status, ran.out, ran.err.count("\n")) == (1, "", 1), command
        else:
            assert ran.status == 0 and ran.out, command


def test_the_cluster_role_grants_exactly_what_the_commands_ask(results: Results) -> None:
    [block] = blocks("yaml")
    role = yaml.safe_load(block)
    granted = {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
               for resource in rule["resources"] for verb in rule["verbs"]}

    assert role["kind"] == "ClusterRole"
    assert granted == results.asked | OPTIONAL_GRANTS


def test_the_install_names_the_extra_the_tool_asks_for(tmp_path: Path) -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    [block] = blocks("sh")
    for line in block.splitlines():
        words = shlex.split(line)
        assert words[:2] == ["pip", "install"] and len(words) == 3, line
        name, _, extra = words[2].partition("[")
        assert name == "simdra" and extra.rstrip("]") in ("", *extras), line
    kubeconfig = write_kubeconfig(tmp_path / "config", "http://127.0.0.1:1")
    [(status, _, err)] = run_without_cel([["why", "x", "--kubeconfig", str(kubeconfig)]])

    assert status == 1 and "pip install 'simdra[demo]'" in block
    assert _said(err.strip()) in _said(section()), "the page quotes another line"


def test_the_page_quotes_the_line_for_a_server_that_does_not_answer(
        tmp_path: Path, unused_port: int) -> None:
    kubeconfig = write_kubeconfig(tmp_path / "config", f"http://127.0.0.1:{unused_port}")
    out, err = io.StringIO(), io.StringIO()
    status = main(["top", "--kubeconfig", str(kubeconfig)], out=out, err=err)
    quoted = re.search(r"`(kubectl-dra: cannot reach the API server[^`]*)`", section())

    assert status == 1 and quoted
    assert _said(err.getvalue()).startswith(_said(quoted[1]))


def _said(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture
def unused_port() -> int:
    with socket.socket() as sock:  # bound, never listening: a connect is refused
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
