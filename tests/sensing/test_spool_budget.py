"""A user's directory in the shared spool is held to a budget while their jobs run.

Job files of any job are held to their own quotas; everything else the user has
there counts against 16 MiB per running (or kept ended) job, and past it what is
not a running job's own file goes, largest first, its owner told. A name of a
file outside the spool is taken out without touching that file.
"""

from __future__ import annotations

import os
from pathlib import Path

from hopsd.daemon import sensing
from hopsd.daemon.problems import InputProblems
from hopsd.daemon.sensing import Sensing
from hopsd.daemon.spool_budget import JOB_BUDGET_BYTES, MAX_DEPTH
from hopsd.daemon.spool_reclaim import MAX_NAMES_SEARCHED
from hopsd.daemon.views import ObservedJob
from hopsd.slurm.tag import HopsTag

ME = os.getuid()
MIB = 1024 * 1024
TAG = HopsTag((1,), 1e6)


def job(slurm_id: int, state: str = "RUNNING") -> ObservedJob:
    return ObservedJob(slurm_id, "alice", "a", state, tag=TAG)


def spool_with(root: Path, problems: InputProblems, *jobs: ObservedJob) -> Sensing:
    """hopsd's sensing over the shared spool ``root``, this tick's jobs noted."""
    s = Sensing(root, uid_of=lambda user: ME, problems=problems)
    s.spools.note(jobs)
    return s


def clean(s: Sensing) -> None:
    s.clean(1e9, 3600.0, {7})


def fill(path: Path, size: int) -> None:
    with path.open("ab") as f:
        f.write(os.urandom(1024) * (size // 1024))


def used(directory: Path) -> int:
    return sum(p.stat().st_blocks * 512 for p in directory.rglob("*") if p.is_file())


def test_a_file_kept_open_beyond_the_budget_is_freed_and_the_owner_told(tmp_path: Path) -> None:
    """Pending jobs give no room (a user could queue thousands): one running job's 16 MiB."""
    problems = InputProblems()
    s = spool_with(tmp_path, problems, job(7), *(job(i, "PENDING") for i in range(20, 30)))
    alice = tmp_path / "alice"
    fill(alice / "7.jsonl", MIB)
    fill(alice / "7.ckpt.json", 4096)  # a small file of the job's own is welcome
    fill(alice / "by-hopsd", 20 * MIB)
    os.chown(alice / "by-hopsd", 65534, -1)  # another owner's: neither counted nor touched
    with (alice / "junk.bin").open("ab") as writer:
        fill(alice / "junk.bin", 20 * MIB)
        clean(s)
        assert os.fstat(writer.fileno()).st_size == 0  # freed though the job still holds it
    assert sorted(p.name for p in alice.iterdir()) == ["7.ckpt.json", "7.jsonl", "by-hopsd"]
    said = problems.take(7) or ""
    assert "junk.bin" in said and f"{JOB_BUDGET_BYTES}-byte budget" in said


def test_a_file_named_for_a_job_hopsd_does_not_read_is_held_to_its_quota(tmp_path: Path) -> None:
    """hopsd reads only its running jobs' reports; a job writing on under another job's name
    keeps its file fresh, so the retention sweep would never take it."""
    problems = InputProblems()
    s = spool_with(tmp_path, problems, job(7))
    alice = tmp_path / "alice"
    fill(alice / "99.jsonl", sensing.MAX_FILE_BYTES + MIB)
    fill(alice / "98.progress.json", 2 * sensing.MAX_PROGRESS_BYTES)
    clean(s)
    assert (alice / "99.jsonl").stat().st_size == 0
    assert (alice / "98.progress.json").stat().st_size == 0
    assert "quota" in (problems.take(7) or "")


def test_past_the_budget_names_of_no_job_go_first_largest_first(tmp_path: Path) -> None:
    """Job 7 runs, job 8 ended (its report is kept for the retention): 32 MiB of room."""
    problems = InputProblems()
    s = spool_with(tmp_path, problems, job(7), job(8))
    s.spools.note([job(7)])
    s.ended(8, "alice", 1e9)
    alice = tmp_path / "alice"
    for name, size in [("7.jsonl", 7), ("8.jsonl", 7), ("7.big", 13), ("notes", 1), ("a", 5)]:
        fill(alice / name, size * MIB)
    fill(alice / "b", 6 * MIB)  # 39 MiB in all: b and a go (33 MiB would still be too much)
    clean(s)
    assert sorted(p.name for p in alice.iterdir()) == ["7.big", "7.jsonl", "8.jsonl", "notes"]
    assert used(alice) <= 2 * JOB_BUDGET_BYTES


def test_a_subdirectory_counts_all_it_holds_and_goes_past_the_budget(tmp_path: Path) -> None:
    s = spool_with(tmp_path, InputProblems(), job(7))
    alice = tmp_path / "alice"
    (alice / "sub" / "deeper").mkdir(parents=True)
    fill(alice / "7.jsonl", MIB)
    with (alice / "sub" / "deeper" / "data").open("ab") as writer:
        fill(alice / "sub" / "deeper" / "data", 20 * MIB)
        clean(s)
        assert os.fstat(writer.fileno()).st_size == 0
    assert sorted(p.name for p in alice.iterdir()) == ["7.jsonl"]


def test_a_tree_deeper_than_hopsd_looks_is_removed_over_a_few_ticks(tmp_path: Path) -> None:
    s = spool_with(tmp_path, InputProblems(), job(7))
    alice = tmp_path / "alice"
    deep = alice.joinpath(*[f"d{i}" for i in range(3 * MAX_DEPTH)])
    deep.mkdir(parents=True)
    fill(deep / "hidden", MIB)  # small, but hopsd cannot see how much is down there
    fill(alice / "7.jsonl", MIB)
    for _ in range(4):
        clean(s)
    assert sorted(p.name for p in alice.iterdir()) == ["7.jsonl"]


def test_a_name_of_a_file_outside_the_spool_is_taken_out_leaving_the_file(tmp_path: Path) -> None:
    (tmp_path / "spool").mkdir()
    s = spool_with(tmp_path / "spool", InputProblems(), job(7))
    alice = tmp_path / "spool" / "alice"
    (tmp_path / "home").mkdir()
    precious = tmp_path / "home" / "precious"
    fill(precious, 20 * MIB)
    before = precious.read_bytes()
    os.link(precious, alice / "junk")
    clean(s)
    assert not (alice / "junk").exists()
    assert precious.read_bytes() == before and precious.stat().st_nlink == 1


def test_many_names_past_the_budget_make_one_note_per_tick(tmp_path: Path) -> None:
    """Each note is logged once per cause and remembered: one per name would let a job
    flood hopsd's log and memory with names."""
    counted: list[str] = []
    problems = InputProblems(count_refused=counted.append)
    s = spool_with(tmp_path, problems, job(7))
    alice = tmp_path / "alice"
    names = [f"n{os.urandom(6).hex()}" for _ in range(JOB_BUDGET_BYTES // 4096 + 500)]
    for name in names:
        (alice / name).write_bytes(b"x")
    clean(s)
    assert counted == ["spool"]
    said = problems.take(7) or ""
    assert "removed 500 name(s)" in said
    assert len(list(alice.iterdir())) == JOB_BUDGET_BYTES // 4096


def test_a_tree_of_more_names_than_a_tick_looks_at_is_cut_a_share_per_tick(
    tmp_path: Path,
) -> None:
    """Each tick looks at and removes a bounded number of names, so a job making many
    costs hopsd no more than that per tick; what is left once it fits stays."""
    s = spool_with(tmp_path, InputProblems(), job(7))
    alice = tmp_path / "alice"
    (alice / "many").mkdir()
    for i in range(MAX_NAMES_SEARCHED + 1000):
        (alice / "many" / str(i)).touch()
    clean(s)
    left = len(os.listdir(alice / "many"))  # a tick's share removed, not all
    assert 1000 <= left <= 1001  # the directory itself is one of the names handled
    clean(s)
    assert len(os.listdir(alice / "many")) == left  # 1000 names of 4 KiB fit in 16 MiB
