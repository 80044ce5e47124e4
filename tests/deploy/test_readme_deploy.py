"""Every command of docs/operator.md's "Deploy to a cluster" section: the ones that render
(helm template, helm lint, kubectl kustomize, and the renderings behind helm install and
kubectl apply/delete -k) run here with real helm and Kustomize; every path any command
names exists. Commands that need a cluster, a registry or a container engine are listed
in NEEDS_A_CLUSTER, so a new one cannot go unnoticed."""

from __future__ import annotations

import re
import shlex

import pytest

from tests.deploy.helm import RELEASE, run_helm
from tests.deploy.kustomize import render
from tests.deploy.layout import REPO
from tests.deploy.test_kind_config import kind_config

SECTION = "## Deploy to a cluster"
# Run by the e2e (tests/e2e, a real cluster) or by hand; here only their paths are checked.
NEEDS_A_CLUSTER = ("docker build", "docker push", "docker run", "helm uninstall",
                   "kubectl delete resourceslices", "kubectl create namespace",
                   "kubectl label namespace", "kubectl delete namespace")
_FENCE = re.compile(r"```sh\n(.*?)```", re.DOTALL)


def deploy_section() -> str:
    text = (REPO / "docs" / "operator.md").read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    return text[start:end if end >= 0 else None]


def section_commands() -> list[list[str]]:
    """The section's shell commands (continuations joined, comments dropped), as words."""
    commands = []
    for block in _FENCE.findall(deploy_section()):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                commands.append(words)
    return commands


def command_id(words: list[str]) -> str:
    return " ".join(words)[:60]


COMMANDS = section_commands()


def test_the_section_has_commands_for_each_step():
    starts = {" ".join(words[:2]) for words in COMMANDS}

    assert {"kind create", "docker build", "helm install", "helm template",
            "kubectl apply", "kubectl delete", "helm uninstall"} <= starts


@pytest.mark.parametrize("words", COMMANDS, ids=command_id)
def test_every_path_a_command_names_exists(words):
    paths = [w for w in words if w.startswith(("deploy/", "hack/")) or w == "."]

    for path in paths:
        assert (REPO / path).exists(), f"{' '.join(words)}: no {path}"


def helm_rendering_of(words: list[str]) -> list[str] | None:
    """The helm command that renders what this one installs or previews (None: not helm)."""
    if words[:2] in (["helm", "template"], ["helm", "install"]):
        assert words[2] == RELEASE, "docs/operator.md names the release simdra"
        return ["template", *(w for w in words[2:] if w != "--wait")]
    return None


@pytest.mark.parametrize("words", COMMANDS, ids=command_id)
def test_every_rendering_command_renders(words):
    if (helm := helm_rendering_of(words)) is not None:
        done = run_helm(*helm)
        assert done.returncode == 0, done.stderr
        assert "kind: DaemonSet" in done.stdout
    elif words[:2] == ["kubectl", "kustomize"] or words[2:3] == ["-k"]:
        assert render(REPO / words[-1]), f"{' '.join(words)} renders nothing"
    elif words[:3] == ["kind", "create", "cluster"]:
        config = words[words.index("--config") + 1]
        assert (REPO / config).resolve() == (REPO / "deploy/kind/cluster.yaml").resolve()
    else:
        assert " ".join(words).startswith(NEEDS_A_CLUSTER), (
            f"{' '.join(words)}: neither run by this test nor listed in NEEDS_A_CLUSTER")


def test_the_kind_cluster_name_matches_the_commands_that_use_it():
    name = kind_config()["name"]

    assert f"--name {name}" in deploy_section()
