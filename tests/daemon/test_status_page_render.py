"""The status page renders user-supplied text (job reasons, users) escaped: a reason
carrying markup must show as text, not run as script in an admin's browser."""

from __future__ import annotations

from typing import Any

from hopsd.views.page import render

ATTACK = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def job(job_id: int, state: str, reason: str, user: str = "alice") -> dict[str, Any]:
    return {
        "job_id": job_id,
        "user": user,
        "state": state,
        "gpu_type": "a100" if state == "running" else None,
        "nodes": {"a100n1": 2} if state == "running" else {},
        "demands": [2],
        "wait_s": 12.0,
        "latency_ratio": 0.5,
        "eta_s": 60.0,
        "start_in_s": 30.0 if state == "queued" else None,
        "reason": reason,
        "problem": None,
    }


def test_user_text_is_escaped_everywhere_on_the_page() -> None:
    status = {
        "jobs": [job(1, "queued", ATTACK), job(2, "running", "ok", user=ATTACK)],
        "cluster": [{"gpu_type": "a100", "nodes": 1, "gpus_total": 4, "gpus_busy": 2,
                     "gpus_idle": 2, "queued": 1}],
        "raqlr": 0.2,
        "raqlr_window_h": 24.0,
        "slurm_error": None,
        "leader": {"holder": "head1:42", "since": 0.0, "expires_at": 1.0, "token": 3},
    }  # fmt: skip
    fairness = {
        "jobs": [{"job_id": 1, "user": ATTACK, "state": "queued", "latency_ratio": 0.5,
                  "ftf_rho": 1.0, "starving": False}],
        "users": [{"user": ATTACK, "usage_share": 1.0}],
        "jain_users": 1.0,
    }  # fmt: skip
    page = render(status, fairness, {"rounds": []})
    assert "<script" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "leader: head1:42 (fencing token 3)" in page
