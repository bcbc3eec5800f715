"""Fuzzing ``hops submit``: no traceback ever reaches the user; invalid input submits nothing."""

from __future__ import annotations

import stat
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hops_cli.main import app
from hops_cli.submit_args import SubmitError, parse_gpus

runner = CliRunner()

gpu_text = st.one_of(
    st.text(alphabet="0123456789,- x", max_size=12),
    st.lists(st.integers(-2, 40), min_size=0, max_size=10).map(lambda xs: ",".join(map(str, xs))),
)
option = st.sampled_from(
    [
        "--samples",
        "--epochs",
        "--dataset-size",
        "--batch-size",
        "--lr",
        "--lr-scale",
        "--model",
        "--params",
        "--parsable",
        "--bogus",
        "--",
    ]
)
value = st.one_of(
    st.integers(-5, 10**7).map(str), st.text(max_size=8), st.sampled_from(["linear", "sqrt", "nan"])
)
header_line = st.one_of(
    st.sampled_from(
        [
            "#SBATCH --time=00:10:00",
            "#SBATCH --gres=gpu:2",
            "#SBATCH -G 1",
            "#SBATCH --hold",
            "#SBATCH --comment=hops1:{}",
            '#SBATCH -J "unterminated',
            "#SBATCH --mem=1G",
            "# plain comment",
            "",
        ]
    ),
    st.text(max_size=30).map(lambda t: "#SBATCH " + t.replace("\n", " ")),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    gpus=gpu_text,
    extra=st.lists(st.tuples(option, value), max_size=5),
    headers=st.lists(header_line, max_size=4),
    executable=st.booleans(),
)
def test_submit_never_tracebacks_and_never_submits_invalid_input(
    port: Any, gpus: str, extra: list[tuple[str, str]], headers: list[str], executable: bool
) -> None:
    port.submitted.clear()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "job.sh"
        path.write_text("#!/bin/bash\n" + "\n".join(headers) + "\nsleep 1\n")
        path.chmod(stat.S_IRWXU if executable else stat.S_IRUSR)
        args = ["submit", str(path), "--gpus", gpus]
        for name, val in extra:
            args.extend([name] if name == "--parsable" else [name, val])
        result = runner.invoke(app, args)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output
    if result.exit_code != 0:
        assert port.submitted == []
        assert result.output.strip() != ""
    else:
        (submitted,) = port.submitted
        assert submitted["tag"].demands == parse_gpus(gpus)


@given(st.text(max_size=20))
def test_parse_gpus_either_parses_or_raises_submit_error(text: str) -> None:
    try:
        demands = parse_gpus(text)
    except SubmitError:
        return
    assert demands and list(demands) == sorted(set(demands)) and all(d > 0 for d in demands)
    assert len(demands) <= 8
