"""`kubectl dra why POD|CLAIM`: the target resolved (a pod means each of its claims),
the snapshot read, each claim explained (`why`), printed as text or a document.

A bare name is a pod when one has it, else a claim; `pod/NAME` and `claim/NAME` say
which. The harness (and cel-python, simdra[demo]) loads here, not before.
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any, TextIO

from simdra._driver.dra_cli import render
from simdra._driver.dra_cli.connect import CommandError
from simdra._driver.dra_cli.gather import Snapshot, gather, get_object
from simdra._driver.kubeapi.client import RestClient
from simdra._driver.kubeapi.errors import ApiStatusError

JSON = dict[str, Any]
POD_WORDS = ("pod", "pods", "po")
CLAIM_WORDS = ("claim", "resourceclaim", "resourceclaims")


def run_why(args: argparse.Namespace, client: RestClient, out: TextIO) -> int:
    """Explain the target's claims."""
    try:
        from simdra._driver.dra_cli import why
    except ImportError as err:
        raise CommandError(f"why needs simdra[demo] installed ({err})") from None
    kind, _, name = args.target.rpartition("/")
    pod = get_object(client, "pods", args.namespace, name) if kind in ("", *POD_WORDS) else None
    if kind and kind not in (*POD_WORDS, *CLAIM_WORDS):
        raise CommandError(f"{args.target!r}: name a pod or a claim (pod/NAME, claim/NAME)", 2)
    wants_nodes = bool(((pod or {}).get("spec") or {}).get("nodeSelector"))
    snapshot = gather(client, ["slices", "claims", "classes", "taint_rules",
                               *(["nodes"] if wants_nodes else [])])
    claims, missing = _target_claims(args, pod, name, snapshot)
    placement = why.Placement.of(pod, snapshot.nodes)
    labels = _namespace_labels(client, args.namespace, claims)
    reports = [why.explain(c, snapshot, placement, labels) for c in claims]
    if args.output in ("json", "yaml"):
        data = {"kind": "Why", "claims": [asdict(r) for r in reports], "missing": missing}
        out.write(render.document(data, args.output))
        return 0
    for line in missing:
        out.write(line + "\n")
    for report in reports:
        out.write(report_text(report, args.max_devices))
    return 0


def _target_claims(args: argparse.Namespace, pod: JSON | None, name: str,
                   snapshot: Snapshot) -> tuple[list[JSON], list[str]]:
    """The claims to explain, and a line for each pod claim not created yet."""
    by_name = {(c.get("metadata") or {}).get("name"): c for c in snapshot.claims
               if (c.get("metadata") or {}).get("namespace") == args.namespace}
    if pod is None:
        claim = by_name.get(name)
        if claim is None:
            raise CommandError(f"no pod or claim {name!r} in namespace {args.namespace!r}")
        return [claim], []
    generated = {s.get("name"): s.get("resourceClaimName")
                 for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []}
    claims, missing = [], []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        claim_name = entry.get("resourceClaimName") or generated.get(entry.get("name"))
        claim = by_name.get(claim_name) if claim_name else None
        if claim is None:
            source = entry.get("resourceClaimTemplateName") or claim_name
            missing.append(f"pod claim {entry.get('name')} ({source}): no ResourceClaim yet")
        else:
            claims.append(claim)
    if not claims and not missing:
        missing.append(f"pod {args.namespace}/{name} has no resource claims")
    return claims, missing


def _namespace_labels(client: RestClient, namespace: str,
                      claims: list[JSON]) -> Mapping[str, str] | None:
    """The namespace's labels when a claim asks for admin access (None: unreadable)."""
    wants = any((r.get("exactly") or {}).get("adminAccess")
                or any(s.get("adminAccess") for s in r.get("firstAvailable") or [])
                for c in claims for r in ((c.get("spec") or {}).get("devices") or {})
                .get("requests") or [])
    if not wants:
        return None
    try:
        answer = client.request("GET", f"/api/v1/namespaces/{namespace}")
    except (ApiStatusError, OSError):
        return None
    return dict((answer.get("metadata") or {}).get("labels") or {})


def report_text(report: Any, max_devices: int) -> str:
    """One claim's report as text: a header, per request a line and its devices (the
    most promising first, at most `max_devices`, the rest counted by check), a verdict."""
    if report.allocated:
        lines = [f"claim {report.claim}: {report.verdict}"]
        lines += [f"  {r}" for r in report.results]
        if report.reserved_for:
            lines.append(f"  reserved for: {', '.join(report.reserved_for)}")
        return "\n".join(lines) + "\n"
    lines = [f"claim {report.claim}: not allocated"]
    if report.error:
        lines.append(f"  {report.error}")
    for request in report.requests:
        lines += _request_lines(request, max_devices)
    lines.append(f"  verdict: {report.verdict}")
    return "\n".join(lines) + "\n"


def _request_lines(request: Any, max_devices: int) -> list[str]:
    from simdra._driver.dra_cli.why import PROMISE

    lines = [f"  request {request.request} (class {request.device_class}, {request.wanted} "
             f"device(s)): {request.usable} of {len(request.devices)} devices usable"]
    if request.problem:
        lines.append(f"    {request.problem}")
    order = {stage: i for i, stage in enumerate(PROMISE)}
    ranked = sorted(request.devices, key=lambda d: -order.get(d.stage, 0))
    lines += [f"    {d.device}: {d.reason}" for d in ranked[:max_devices]]
    rest = Counter(d.stage for d in ranked[max_devices:])
    if rest:
        counted = ", ".join(f"{stage} {n}" for stage, n in rest.most_common())
        lines.append(f"    ... and {sum(rest.values())} more (first failed check: {counted})")
    return lines
