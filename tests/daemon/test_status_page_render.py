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
        "queue_position": 1 if state == "queued" else None,
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


def test_a_long_queue_shows_the_jobs_served_first_and_says_how_many_more() -> None:
    """10,000 waiting jobs made a page of megabytes at every reload: the tables stop at
    PAGE_ROWS, the queue's rows are the first it serves, and the page says where the rest are."""
    from hopsd.views.page import PAGE_ROWS

    waiting = PAGE_ROWS + 50
    jobs = []
    for k in range(waiting):
        row = job(1000 + k, "queued", "waiting for GPUs")
        row["queue_position"] = waiting - k  # submitted first, served last
        jobs.append(row)
    status = {
        "jobs": [*jobs, job(1, "running", "ok")],
        "cluster": [],
        "raqlr": 0.0,
        "raqlr_window_h": 24.0,
        "slurm_error": None,
        "leader": {"holder": None, "since": None, "expires_at": None, "token": 0},
    }
    fairness = {"jobs": [], "users": [], "jain_users": 1.0}
    page = render(status, fairness, {"rounds": []})
    queue = page.split("<table id='queue'>", 1)[1].split("</table>", 1)[0]
    shown = [
        int(cell.split("'>", 1)[1].split("<", 1)[0]) for cell in queue.split("href='/job/")[1:]
    ]
    assert len(shown) == PAGE_ROWS
    assert shown == [1000 + waiting - p for p in range(1, PAGE_ROWS + 1)]  # by queue position
    assert f"<h2>Queue ({waiting})</h2>" in page
    assert "50 more waiting jobs not shown" in page
    assert "more running jobs" not in page
