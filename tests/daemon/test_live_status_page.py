"""hopsd's status page in a real browser: Debian's headless Chromium loads it from a live
hopsd on the test cluster; the test checks what the page shows (each job and type row
as ``/status.json`` says, each timeline bar a run of the ledger, drawn where it was in a
screenshot of the timeline) and keeps screenshots (``test-artifacts/status-page.png``
and ``timeline.png``, or under ``$HOPS_TEST_ARTIFACTS``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.request
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from daemon_live import LIVE, LiveEnv, hopsd_process, serve_metrics
from timeline_check import bars_against_ledger, bars_in_screenshot

from hopsd.views.cells import duration, ratio

pytestmark = LIVE

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = ROOT / "tests" / "cli" / "golden" / "status.json"
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


class Tables(HTMLParser):
    """Cell texts of every table on the page, by table id; and the leader line."""

    def __init__(self) -> None:
        super().__init__()
        self.tables: dict[str, list[list[str]]] = {}
        self.leader = ""
        self._table: str | None = None
        self._cell: list[str] | None = None
        self._in_leader = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        ident = dict(attrs).get("id") or ""
        if tag == "table":
            self._table = ident
            self.tables[ident] = []
        elif tag == "tr" and self._table is not None:
            self.tables[self._table].append([])
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "p" and ident == "leader":
            self._in_leader = True

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._table is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None
        elif tag == "p":
            self._in_leader = False

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)
        if self._in_leader:
            self.leader += data


def chromium(args: list[str], profile: Path) -> str:
    binary = shutil.which("chromium")
    assert binary, "chromium missing: scripts/install.sh installs Debian's chromium"
    done = subprocess.run(
        [binary, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def fetch(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return sorted(value)
    return type(value).__name__


TYPE_COLUMNS = ("gpu_type", "nodes", "gpus_total", "gpus_busy", "gpus_idle")


def _between(shown: str, values: list[float | None]) -> bool:
    """A duration the page shows is one of ``values`` as the page formats it, or lies
    between them (it counted down between the two documents)."""
    if shown in {duration(v) for v in values}:
        return True
    known = [v for v in values if v is not None]
    if shown == "-" or len(known) < 2:
        return False
    return any(duration(t) == shown for t in range(int(min(known)), int(max(known)) + 1))


def _lr_between(shown: str, values: list[float | None]) -> bool:
    """An LR the page shows is one of ``values`` as the page formats it, or between them
    (hopsd updated it between the two documents)."""
    if shown in {ratio(v) for v in values}:
        return True
    known = [v for v in values if v is not None]
    return (
        shown != "-"
        and len(known) >= 2
        and min(known) - 0.005 <= float(shown) <= max(known) + 0.005
    )


def agrees_with_status(page: Tables, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """Each number the page's job and type tables show is what ``/status.json`` said just
    before or just after the page was made: state, type, nodes, demands, wait, LR, START
    and ETA."""
    problems = []
    docs = [before, after]
    for row in page.tables["running"][1:]:
        seen = [(str(j["job_id"]), j["state"], j["gpu_type"] or "",
                 ",".join(f"{n}:{g}" for n, g in j["nodes"].items()))
                for d in docs for j in d["jobs"]]  # fmt: skip
        if tuple(row[:1] + row[2:5]) not in seen:
            problems.append(f"running row {row} is in neither {seen}")
        lrs = [j["latency_ratio"] for d in docs for j in d["jobs"] if str(j["job_id"]) == row[0]]
        if not _lr_between(row[5], lrs):
            problems.append(f"running row {row}: LR {row[5]} is none of {lrs}")
        etas = [j["eta_s"] for d in docs for j in d["jobs"] if str(j["job_id"]) == row[0]]
        if not _between(row[6], etas):
            problems.append(f"running row {row}: ETA {row[6]} is none of {etas}")
    for row in page.tables["queue"][1:]:
        seen = [(str(j["job_id"]), j["state"], ",".join(map(str, j["demands"])))
                for d in docs for j in d["jobs"]]  # fmt: skip
        if (row[0], row[2], row[3]) not in seen:
            problems.append(f"queue row {row} is in neither {seen}")
        mine = [j for d in docs for j in d["jobs"] if str(j["job_id"]) == row[0]]
        if not _lr_between(row[5], [j["latency_ratio"] for j in mine]):
            problems.append(f"queue row {row}: LR {row[5]} is none of {mine}")
        if not _between(row[4], [j["wait_s"] for j in mine]):
            problems.append(f"queue row {row}: wait {row[4]} is none of {mine}")
        if not _between(row[6], [j["start_in_s"] for j in mine]):
            problems.append(f"queue row {row}: START {row[6]} is none of {mine}")
    for row in page.tables["gpu-types"][1:]:
        seen = [tuple(str(c[k]) for k in TYPE_COLUMNS) for d in docs for c in d["cluster"]]
        if tuple(row) not in seen:
            problems.append(f"gpu-types row {row} is in neither {seen}")
    return problems


def check_timeline(base: str, env: LiveEnv, shot: Path, tmp_path: Path) -> None:
    """The timeline's bars are the ledger's runs, and drawn where they were."""
    before = fetch(f"{base}/timeline.json")
    shot.unlink(missing_ok=True)
    chromium([f"--screenshot={shot}", "--window-size=1000,400", "--hide-scrollbars",
              f"{base}/timeline.svg"], tmp_path / "profile-timeline")  # fmt: skip
    after = fetch(f"{base}/timeline.json")
    bars, wrong = bars_against_ledger(after, env.sessions)
    assert bars >= 2 and wrong == [], (bars, wrong)
    drawn, misplaced = bars_in_screenshot(shot, before, after)
    assert drawn >= 2 and misplaced == [], (drawn, misplaced)


def check_job_page(base: str, env: LiveEnv, job: int, tmp_path: Path) -> None:
    """``/job/ID``: its timeline's bars are the job's runs of the ledger (held from the
    release hops made to Slurm's start), and the page lists each run and prediction."""
    doc = fetch(f"{base}/job/{job}.json")
    assert doc["job"]["job_id"] == job and "script" not in doc["job"]
    bars, wrong = bars_against_ledger(doc["timeline"], env.sessions)
    kinds = {b["kind"] for n in doc["timeline"]["nodes"] for b in n["bars"]}
    # a held stretch (release to Slurm's start) is under a second here, and Slurm's
    # start is whole seconds: one is drawn only where the start is after the release
    assert bars >= 1 and wrong == [] and "run" in kinds, (bars, wrong, kinds)
    assert doc["predictions"], "hopsd recorded no START/ETA for a job it ran"
    dom = chromium(["--dump-dom", f"{base}/job/{job}"], tmp_path / "profile-job")
    page = Tables()
    page.feed(dom)
    assert len(page.tables["runs"]) - 1 >= len(doc["job"]["runs"]) >= 1
    assert len(page.tables["predictions"]) - 1 >= len(doc["predictions"])
    assert 'class="bar run"' in dom or "class='bar run'" in dom
    with pytest.raises(urllib.error.HTTPError) as missing:
        urllib.request.urlopen(f"{base}/job/999999999", timeout=10)
    assert missing.value.code == 404


@pytest.mark.slow
def test_status_page_in_headless_chromium_shows_queue_running_jobs_and_fairness(
    env: LiveEnv, tmp_path: Path
) -> None:
    port = serve_metrics(env)
    # 18 GPUs (8 a100, 8 v100, 2 k80): two of three 8-GPU jobs run, one waits
    jobs = [env.submit((8,), 5e6, label=f"r{i}") for i in range(3)]
    proc = hopsd_process(env)
    base = f"http://127.0.0.1:{port}"
    try:
        end = time.monotonic() + 90
        status: dict[str, Any] = {}
        while time.monotonic() < end:
            try:
                status = fetch(f"{base}/status.json")
            except OSError:
                status = {}
            states = {j["job_id"]: j["state"] for j in status.get("jobs", [])}
            running = [j for j in jobs if states.get(j) == "running"]
            if len(running) == 2 and len(states) == 3:
                queued = next(j for j in jobs if j not in running)
                break
            time.sleep(1.0)
        else:
            pytest.fail(f"jobs never ran: {status}; log: {(env.root / 'hopsd.log').read_text()}")
        # the JSON is the CLI's schema
        golden = json.loads(GOLDEN.read_text())
        assert sorted(status) == sorted(golden)
        assert sorted(status["jobs"][0]) == sorted(golden["jobs"][0])
        fairness = fetch(f"{base}/fairness.json")
        assert {"jobs", "users", "jain_users", "raqlr"} <= set(fairness)

        before = fetch(f"{base}/status.json")
        dom = chromium(["--dump-dom", f"{base}/status"], tmp_path / "profile-dom")
        after = fetch(f"{base}/status.json")
        page = Tables()
        page.feed(dom)
        assert agrees_with_status(page, before, after) == []
        assert "leader: " in page.leader and f":{proc.pid}" in page.leader, page.leader
        types = {row[0] for row in page.tables["gpu-types"][1:]}
        assert {"a100", "k80"} <= types
        run_rows = {row[0]: row for row in page.tables["running"][1:]}
        assert {str(j) for j in running} <= set(run_rows)
        assert all(run_rows[str(j)][3] in types for j in running)  # a GPU type shown
        queue_rows = {row[0]: row for row in page.tables["queue"][1:]}
        assert str(queued) in queue_rows
        assert queue_rows[str(queued)][7] not in ("", "-")  # the reason it waits
        fair_rows = {row[0] for row in page.tables["fairness-jobs"][1:]}
        assert {str(j) for j in [*running, queued]} <= fair_rows
        users = [row[0] for row in page.tables["fairness-users"][1:]]
        assert users, page.tables["fairness-users"]
        assert len(page.tables["rounds"]) >= 2  # a header and at least one round

        check_job_page(base, env, running[0], tmp_path)

        artefacts = Path(os.environ.get("HOPS_TEST_ARTIFACTS", ROOT / "test-artifacts"))
        artefacts.mkdir(parents=True, exist_ok=True)
        check_timeline(base, env, artefacts / "timeline.png", tmp_path)
        shot = artefacts / "status-page.png"
        shot.unlink(missing_ok=True)
        chromium(
            [f"--screenshot={shot}", "--window-size=1280,1400", f"{base}/status"],
            tmp_path / "profile-shot",
        )
        assert shot.stat().st_size > 10_000
        # read-only: nothing but GET
        request = urllib.request.Request(f"{base}/status", method="POST", data=b"x")
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 501
    finally:
        proc.terminate()
        proc.wait(timeout=30)
