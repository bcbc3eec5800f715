"""Record the narrow ``squeue --Format`` read and ``squeue --json`` of the same queue.

Run against the test cluster (``SLURM_CONF`` set, queue otherwise empty); it
submits a mix of jobs (held and tagged, running on one node and on two, an
uneven split, a job array, finished and failed jobs, a requeued held job, a
name with spaces and bars, ``--cpus-per-gpu``, an output pattern), waits for
them to settle, writes both replies next to each other and cancels the jobs::

    .venv/bin/python tests/slurm/record_narrow_queue.py tests/fixtures/slurm/queue_mix.22.05

The fixtures it writes (``PREFIX.format.txt``, ``PREFIX.json``) are what
``tests/slurm/test_parse_queue.py`` compares.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from slurm_cli import sbatch, scontrol

from hopsd.slurm.parse_queue import queue_argv

TAG = 'hops1:{"d":[1,2],"n":1000,"b":32,"m":"resnet50","p":25000000}'


def main(prefix: str) -> int:
    sleep = ["--wrap", "sleep 600"]
    ids = list(
        map(
            str,
            [
                sbatch("-H", "-p", "all", "--gres=gpu:1", "--requeue", f"--comment={TAG}", *sleep),
                sbatch(
                    "-p",
                    "a100",
                    "--gres=gpu:2",
                    "-o",
                    "/tmp/out-%j-%u.txt",
                    "-J",
                    "one node",
                    *sleep,
                ),
                sbatch("-p", "a100", "-N", "2", "--gres=gpu:1", "-J", "two|nodes even", *sleep),
                sbatch("-p", "v100", "-w", "v100n2", "--gres=gpu:3", "-J", "filler", *sleep),
                sbatch("-H", "-p", "v100", "-N", "2", "--gpus=4", "-J", "uneven", *sleep),
                sbatch("-p", "all", "--array=0-5%2", "-c", "1", "-J", "arr", *sleep),
                sbatch("-p", "all", "-J", "done", "--wrap", "true"),
                sbatch("-p", "all", "-J", "fails", "--wrap", "exit 3"),
                sbatch(
                    "-p", "k80", "--gres=gpu:1", "--cpus-per-gpu=2", "--requeue", "-J", "rq", *sleep
                ),
                sbatch("-H", "-p", "all", "--gres=gpu:1", "-J", "x" * 300, *sleep),
            ],
        )
    )
    uneven = ids[4]
    scontrol(
        "update",
        f"JobId={uneven}",
        "Partition=v100",
        "NodeList=v100n[1-2]",
        "NumNodes=2",
        "TresPerNode=",
        "TresPerJob=gres:gpu:4",
    )
    scontrol("release", uneven)
    time.sleep(8)
    scontrol("requeuehold", ids[8])
    time.sleep(6)
    narrow = subprocess.run(queue_argv(), capture_output=True, text=True, check=True).stdout
    full = subprocess.run(
        ["squeue", "--json", "--states=all"], capture_output=True, text=True, check=True
    ).stdout
    Path(f"{prefix}.format.txt").write_text(narrow)
    Path(f"{prefix}.json").write_text(full)
    subprocess.run(["scancel", *ids], capture_output=True, check=False)
    print(f"recorded {len(narrow.splitlines())} jobs into {prefix}.format.txt and .json")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
