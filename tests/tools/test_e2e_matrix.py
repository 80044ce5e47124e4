"""The e2e's release bookkeeping: which gates a live API server reports (GA included), and
the scenario x release table hack/e2e-matrix.sh prints."""

from __future__ import annotations

from pathlib import Path

from tests.e2e.controlplane import parse_feature_metric
from tests.e2e.matrix import read, render

METRICS = """\
# HELP kubernetes_feature_enabled [BETA] The stage and enablement of a k8s feature.
# TYPE kubernetes_feature_enabled gauge
kubernetes_feature_enabled{name="DRAAdminAccess",stage=""} 1
kubernetes_feature_enabled{name="DRADeviceTaintRules",stage="BETA"} 0
kubernetes_feature_enabled{name="DRAExtendedResource",stage="BETA"} 1
apiserver_request_total{code="200"} 7
"""


def test_gates_come_with_their_state_ga_included() -> None:
    assert parse_feature_metric(METRICS) == {
        "DRAAdminAccess": True,  # GA: not in --help, still present
        "DRADeviceTaintRules": False,
        "DRAExtendedResource": True,
    }


def test_matrix_marks_each_release_and_lists_skip_reasons(tmp_path: Path) -> None:
    new = tmp_path / "new.tsv"
    new.write_text("v1.37.2\ttest_taints\tpassed\t3.0\t\n"
                   "v1.37.2\ttest_bind\tskipped\t0.0\tKubernetes v1.37.2 has it off: X\n")
    old = tmp_path / "old.tsv"
    old.write_text("v1.34.4\ttest_taints\tfailed\t9.0\t\n")
    lines = render(read([new, old]))
    assert lines[0].split() == ["scenario", "v1.34.4", "v1.37.2"]
    assert lines[1].split() == ["test_bind", "-", "skip"]
    assert lines[2].split() == ["test_taints", "FAIL", "pass"]
    assert lines[3] == "skip v1.37.2 test_bind: Kubernetes v1.37.2 has it off: X"


def test_a_pre_release_sorts_before_its_release_and_names_its_kubelet(tmp_path: Path) -> None:
    beta = tmp_path / "beta.tsv"
    beta.write_text("v1.38.0-beta.0\ttest_taints\tpassed\t3.0\t\tv1.37.2\n")
    final = tmp_path / "final.tsv"
    final.write_text("v1.38.0\ttest_taints\tpassed\t3.0\t\n")
    older = tmp_path / "older.tsv"
    older.write_text("v1.37.2\ttest_taints\tpassed\t3.0\t\n")
    lines = render(read([final, beta, older]))
    assert lines[0].split() == ["scenario", "v1.37.2", "v1.38.0-beta.0", "v1.38.0"]
    assert lines[1].split() == ["test_taints", "pass", "pass", "pass"]
    assert lines[2:] == ["v1.38.0-beta.0: control plane v1.38.0-beta.0, kubelet v1.37.2"]
