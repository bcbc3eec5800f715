"""hopsd's read-only status page: the ``hops status`` and ``hops fairness`` documents as HTML.

Rendered on the server from the same payloads the JSON routes return, with no
script: whatever a browser (or ``curl``) fetches is the whole page. Every value
is escaped: job names, users and reasons come from users.
"""

from __future__ import annotations

import html
import json
import time
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from hopsd.config import HopsConfig
from hopsd.core.privacy import PrivateData
from hopsd.ledger.records import RoundSummary
from hopsd.ledger.unit import Ledger
from hopsd.views.fairness import fairness_payload
from hopsd.views.privacy import public_fairness, public_status
from hopsd.views.status import status_payload

#: A route's answer: content type and body.
Document = tuple[str, bytes]

STYLE = (
    "body{font-family:sans-serif;margin:1.5em;color:#222}"
    "table{border-collapse:collapse;margin:.5em 0 1.5em}"
    "th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}"
    "th{background:#eee}.starving{color:#b00;font-weight:bold}"
)


def rounds_payload(ledger: Ledger, limit: int = 20) -> dict[str, Any]:
    """The latest enacting rounds, newest first."""
    with ledger.reading() as unit:
        rounds = unit.recent_rounds(limit)
    return {"rounds": [_round(r) for r in rounds]}


def _round(r: RoundSummary) -> dict[str, Any]:
    try:
        note = json.loads(r.note) if r.note else {}
    except ValueError:
        note = {}
    return {
        "number": r.number,
        "started_at": r.started_at,
        "kind": note.get("kind", ""),
        "queued": r.queued,
        "running": r.running,
        "actions": len(note.get("actions", [])),
        "decision_s": round(r.decision_s, 4),
        "idle_gpus_waiting": r.idle_gpus_waiting,
        "policy": r.policy,
    }


def documents(
    ledger: Ledger,
    config: HopsConfig,
    rules: Callable[[], PrivateData] = PrivateData,
    window_h: float = 24.0,
) -> dict[str, Callable[[], Document]]:
    """The routes hopsd serves beside /metrics: the page and the JSON behind it.

    Nobody is identified over HTTP, so every document is what Slurm's
    ``PrivateData`` (``rules``) lets any user see (:mod:`hopsd.views.privacy`).
    """

    def status() -> dict[str, Any]:
        with ledger.reading() as unit:
            return public_status(status_payload(unit, config, None, window_h), rules())

    def fairness() -> dict[str, Any]:
        with ledger.reading() as unit:
            return public_fairness(fairness_payload(unit, config, window_h), rules())

    def as_json(build: Callable[[], dict[str, Any]]) -> Callable[[], Document]:
        return lambda: ("application/json", json.dumps(build()).encode() + b"\n")

    def page() -> Document:
        body = render(status(), fairness(), rounds_payload(ledger))
        return "text/html; charset=utf-8", body.encode()

    return {
        "/status": page,
        "/status.json": as_json(status),
        "/fairness.json": as_json(fairness),
        "/rounds.json": as_json(lambda: rounds_payload(ledger)),
    }


def render(status: dict[str, Any], fairness: dict[str, Any], rounds: dict[str, Any]) -> str:
    """The whole page."""
    leader = status["leader"]
    led = (
        f"leader: {leader['holder']} (fencing token {leader['token']})"
        if leader["holder"]
        else "leader: none"
    )
    running = [j for j in status["jobs"] if j["state"] == "running"]
    queued = [j for j in status["jobs"] if j["state"] != "running"]
    parts = [
        "<!DOCTYPE html><html><head><meta charset='utf-8'><title>hops status</title>",
        f"<style>{STYLE}</style></head><body><h1>hops</h1>",
        f"<p id='leader'>{_e(led)} &middot; RAQLR ({status['raqlr_window_h']:g} h): "
        f"{status['raqlr']:.2f} &middot; page made {_e(_utc(time.time()))}</p>",
        "<h2>GPU types</h2>",
        _table(
            "gpu-types",
            ("type", "nodes", "GPUs", "busy", "idle"),
            (
                (c["gpu_type"], c["nodes"], c["gpus_total"], c["gpus_busy"], c["gpus_idle"])
                for c in status["cluster"]
            ),
        ),
        f"<h2>Queue ({len(queued)})</h2>",
        _table(
            "queue",
            ("job", "user", "state", "demands", "wait", "LR", "reason"),
            (
                (
                    j["job_id"],
                    j["user"],
                    j["state"],
                    ",".join(map(str, j["demands"])),
                    _dur(j["wait_s"]),
                    _lr(j["latency_ratio"]),
                    j["reason"] or j["problem"] or "",
                )
                for j in queued
            ),
        ),
        f"<h2>Running ({len(running)})</h2>",
        _table(
            "running",
            ("job", "user", "type", "nodes", "LR", "ETA", "reason"),
            (
                (
                    j["job_id"],
                    j["user"],
                    j["gpu_type"] or "",
                    ",".join(f"{n}:{g}" for n, g in j["nodes"].items()),
                    _lr(j["latency_ratio"]),
                    _dur(j["eta_s"]),
                    j["reason"] or "",
                )
                for j in running
            ),
        ),
        "<h2>Fairness per job</h2>",
        _table(
            "fairness-jobs",
            ("job", "user", "state", "LR", "rho", "starving"),
            (
                (
                    j["job_id"],
                    j["user"],
                    j["state"],
                    _lr(j["latency_ratio"]),
                    _lr(j["ftf_rho"]),
                    "yes" if j["starving"] else "",
                )
                for j in fairness["jobs"]
            ),
        ),
        f"<h2>Fairness per user</h2><p>Jain index {fairness['jain_users']:.3f}</p>",
        _table("fairness-users", *_users(fairness["users"])),
        "<h2>Recent rounds</h2>",
        _table(
            "rounds",
            ("round", "at", "kind", "queued", "running", "actions", "decision s", "idle GPUs"),
            (
                (
                    r["number"],
                    _utc(r["started_at"]),
                    r["kind"],
                    r["queued"],
                    r["running"],
                    r["actions"],
                    f"{r['decision_s']:.3f}",
                    r["idle_gpus_waiting"],
                )
                for r in rounds["rounds"]
            ),
        ),
        "</body></html>",
    ]
    return "".join(parts)


def _users(users: Sequence[dict[str, Any]]) -> tuple[Sequence[str], Iterable[Sequence[Any]]]:
    """Columns as the fairness document has them (usage, share, ...), whatever they are."""
    if not users:
        return ("user",), []
    headers = list(users[0].keys())
    return headers, ([_cell(u[h]) for h in headers] for u in users)


def _table(ident: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{_e(_cell(v))}</td>" for v in row) + "</tr>" for row in rows
    )
    return f"<table id='{ident}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def _e(text: object) -> str:
    return html.escape(str(text), quote=True)


def _lr(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def _dur(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 90:
        return f"{seconds:.0f}s"
    if seconds < 5400:
        return f"{seconds / 60:.0f}m"
    return f"{seconds / 3600:.1f}h"


def _utc(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%d %H:%M:%SZ")
