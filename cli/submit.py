"""``hops submit``: validate locally, then sbatch the script held and tagged, as the caller."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from hops_cli.common import EXIT_USAGE, config_of, fail, friendly_errors
from hops_cli.notice_guard import submitted_copy
from hops_cli.submit_args import (
    ScriptInfo,
    SubmitError,
    check_options,
    parse_count,
    parse_gpus,
    read_script,
    total_samples,
    type_list,
)
from hops_cli.submit_env import export_option, job_environment, user_export, without_export
from hopsd.core.admission import admit
from hopsd.core.inventory import (
    ManagedNode,
    facts_of,
    gpus_per_type,
    managed_nodes,
    partitions_for_types,
)
from hopsd.slurm.port import SubmitRequest
from hopsd.views.cells import duration

if TYPE_CHECKING:
    from hopsd.config import HopsConfig
    from hopsd.slurm.port import SlurmPort
    from hopsd.slurm.tag import HopsTag


def _managed(ctx: typer.Context) -> list[ManagedNode]:
    """The managed nodes: GPUs per type (a demand no partition can hold is refused up front)
    and the partitions of each type (a job limited to some types is submitted to theirs)."""
    from hopsd.slurm.factory import port_from_config

    config = config_of(ctx)
    port = port_from_config(config)
    return managed_nodes(facts_of(port.list_nodes()), config.partitions, config.node_types)


def _partition_option(
    managed: list[ManagedNode], tag: HopsTag, given: tuple[str, ...]
) -> list[str]:
    """``--partition`` of the types the job may use (none without --types/--exclude-types)."""
    if not (tag.types or tag.exclude_types):
        return []
    if any(o.split("=", 1)[0] in ("-p", "--partition") or o.startswith("-p") for o in given):
        fail(
            "--types/--exclude-types choose the job's partitions; remove -p/--partition",
            EXIT_USAGE,
        )
    parts = partitions_for_types(managed, tag.types, tag.exclude_types)
    return [f"--partition={','.join(parts)}"] if parts else []


def _forecast_here(config: HopsConfig, port: SlurmPort, tag: HopsTag) -> dict[str, Any]:
    import getpass

    from hops_cli.ledger_access import reading
    from hopsd.config import ConfigError
    from hopsd.daemon.test_only import test_only_payload
    from hopsd.solver_banner import silence_solver_banner

    silence_solver_banner()  # the forecast solves plans: nothing but the answer on stdout
    payload: dict[str, Any] = {}
    try:
        with reading(config) as unit:
            payload = test_only_payload(config, unit, port, tag, getpass.getuser())
    except ConfigError as exc:  # the policy's [policies.NAME] table, read only to forecast
        fail(f"invalid configuration: {exc}", EXIT_USAGE)
    return payload


def _ask_hopsd(ledger: Path, tag: HopsTag) -> dict[str, Any]:
    from hopsd.daemon.test_only import ask_hopsd

    return ask_hopsd(ledger, ledger.stat().st_uid, tag)


def _print_test_only(config: HopsConfig, port: SlurmPort, tag: HopsTag, as_json: bool) -> None:
    """The forecast of the job as it would be submitted (:mod:`hopsd.daemon.test_only`):
    made here on the ledger, or asked of hopsd where its ledger is private to it."""
    import json

    from hops_cli.ledger_access import private_ledger
    from hopsd.ledger.errors import LedgerError

    ledger = private_ledger(config)
    try:
        payload = _forecast_here(config, port, tag) if ledger is None else _ask_hopsd(ledger, tag)
    except LedgerError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(payload, indent=2))
        return
    load = (
        ""
        if payload["running_jobs"] is None
        else f"{payload['running_jobs']} job(s) running, {payload['queued_jobs']} waiting, "
    )
    typer.echo(f"not submitted; {load}forecast by hopsd's step:")
    rows = ([("expected", payload["expected"])] if payload["expected"] else []) + [
        ("", o) for o in payload["options"]
    ]
    for label, row in rows:
        typer.echo(
            f"  {label:<9} {row['gpu_type'] or '-':<8} {row['gpus']:>3} GPUs  "
            f"start {_in(row['start_in_s'])}  finish {_in(row['finish_in_s'])}"
        )


def _in(seconds: float | None) -> str:
    return "beyond the forecast" if seconds is None else f"in {duration(seconds)}"


def _size(samples: str | None, epochs: float | None, dataset_size: str | None) -> int:
    """The job's size in samples: ``--samples``, or ``--epochs`` times ``--dataset-size``."""
    return total_samples(
        None if samples is None else parse_count(samples, "--samples"),
        epochs,
        None if dataset_size is None else parse_count(dataset_size, "--dataset-size"),
    )


def _checked_script(script: str, extra: tuple[str, ...]) -> ScriptInfo:
    """The batch script, its #SBATCH lines and the sbatch options given, checked."""
    info = read_script(script)
    check_options(info.directives, f"{script} (#SBATCH)")
    check_options(extra, "sbatch options")
    return info


def _check_admission(ctx: typer.Context, managed: list[ManagedNode], tag: HopsTag) -> None:
    """Refuse up front a job hopsd would refuse: too large for every type, or not admitted."""
    demands = tag.demands
    capacity = gpus_per_type(managed)
    if capacity and demands[-1] > max(capacity.values()):
        fail(
            f"--gpus: {demands[-1]} GPUs is more than any managed GPU type has "
            f"({', '.join(f'{t}: {n}' for t, n in sorted(capacity.items()))})",
            EXIT_USAGE,
        )
    admission = admit(
        demands,
        tag.total_samples,
        tag.batch_size,
        largest_config=max(capacity.values(), default=0),
        max_demand=config_of(ctx).max_demand_gpus,
        per_type=capacity or None,
        types=tag.types,
        exclude_types=tag.exclude_types,
    )
    if capacity and not admission.admitted:
        fail(f"hopsd would refuse this job: {admission.refusal}", EXIT_USAGE)


def _sbatch_args(
    config: HopsConfig,
    managed: list[ManagedNode],
    tag: HopsTag,
    extra: tuple[str, ...],
    directives: tuple[str, ...],
) -> list[str]:
    """sbatch's options: the user's own, the job's environment exported, its partitions."""
    notice = config.notice_signal if config.checkpoint_grace_s > 0 else ""
    env = job_environment(config.spool_dir, tag.total_samples, tag.batch_size, notice)
    theirs = user_export(extra) or user_export(directives)
    args = [*without_export(extra), export_option(env, theirs)]
    return args + _partition_option(managed, tag, (*extra, *directives))


def _say_submitted(job_id: object, demands: tuple[int, ...], size: int, parsable: bool) -> None:
    """The job id alone (``--parsable``), or a sentence with its GPU counts and size."""
    if parsable:
        typer.echo(str(job_id))
    else:
        typer.echo(
            f"Submitted hops job {job_id} (GPUs {','.join(map(str, demands))}, "
            f"{size} samples); hopsd will place it"
        )


# The command's options, one type each: the signature reads as the list of options.
ScriptArgument = Annotated[
    str, typer.Argument(help="Batch script; its #SBATCH lines keep working.")
]

GpusOption = Annotated[
    str, typer.Option("--gpus", help="Acceptable GPU counts: '1,2,4' or a range '2-8'.")
]

SamplesOption = Annotated[
    str | None,
    typer.Option("--samples", help="Total training samples: 5000000, 5e6, 5M, 2.5k."),
]

EpochsOption = Annotated[float | None, typer.Option("--epochs", help="Epochs to train.")]

DatasetSizeOption = Annotated[
    str | None, typer.Option("--dataset-size", help="Samples per epoch: 1281167, 1.2M.")
]

BatchSizeOption = Annotated[
    int, typer.Option("--batch-size", help="Per-GPU batch size (fixed across GPU counts).")
]

LrOption = Annotated[
    float | None, typer.Option("--lr", help="Learning rate at the smallest GPU count.")
]

LrScaleOption = Annotated[
    str, typer.Option("--lr-scale", help="How hops scales --lr with GPUs: none|linear|sqrt.")
]

ModelOption = Annotated[
    str, typer.Option("--model", help="Model name, a hint for estimates: resnet50, org/name.")
]

ParamsOption = Annotated[
    float, typer.Option("--params", help="Model parameters, for the communication model.")
]

TypesOption = Annotated[
    str, typer.Option("--types", help="Only these GPU types, e.g. 'a100,v100'.")
]

ExcludeTypesOption = Annotated[
    str, typer.Option("--exclude-types", help="Never these GPU types, e.g. 'k80'.")
]

NoPreemptOption = Annotated[
    bool,
    typer.Option("--no-preempt", help="Once started, hops never moves or preempts the job."),
]

ParsableOption = Annotated[bool, typer.Option("--parsable", help="Print only the job id.")]

TestOnlyOption = Annotated[
    bool,
    typer.Option(
        "--test-only",
        help="Submit nothing: print when the job would start and finish, as a whole "
        "and on each GPU type and count it could get (hopsd's step run forward).",
    ),
]

AsJsonOption = Annotated[bool, typer.Option("--json", help="With --test-only: JSON.")]


def submit(
    ctx: typer.Context,
    script: ScriptArgument,
    gpus: GpusOption = "1",
    samples: SamplesOption = None,
    epochs: EpochsOption = None,
    dataset_size: DatasetSizeOption = None,
    batch_size: BatchSizeOption = 32,
    lr: LrOption = None,
    lr_scale: LrScaleOption = "none",
    model: ModelOption = "unknown",
    params: ParamsOption = 25e6,
    types: TypesOption = "",
    exclude_types: ExcludeTypesOption = "",
    no_preempt: NoPreemptOption = False,
    parsable: ParsableOption = False,
    test_only: TestOnlyOption = False,
    as_json: AsJsonOption = False,
) -> None:
    """Submit a training job that hops places on the best GPUs for it.

    Options after `--` go to sbatch unchanged. The job is submitted held,
    requeueable and tagged; hopsd picks the GPU type, nodes and count from
    --gpus and releases it.

    Before hops moves or preempts a job it gives every process of the job
    notice (SIGUSR1 by default, daemon.notice_signal), whatever launched it:
    the script, srun or torchrun. A shell script is sent with one line added
    before its first command, trap '' USR1, so the shell and the launchers it
    starts outlive the notice; the probe in each rank catches it and the job
    checkpoints (examples/pytorch has templates).

    Example: hops submit train.sh --gpus 1,2,4 --epochs 90 --dataset-size 1281167

    With --test-only nothing is submitted: hops adds the job to the live state
    and runs hopsd's scheduling step forward, then prints the predicted start
    and finish (like sbatch --test-only, for each type and count).
    """
    from hopsd.slurm.errors import TagError
    from hopsd.slurm.tag import HopsTag

    extra = tuple(ctx.args)
    try:
        demands = parse_gpus(gpus)
        size = _size(samples, epochs, dataset_size)
        info = _checked_script(script, extra)
        if batch_size <= 0:
            raise SubmitError(f"--batch-size must be > 0, got {batch_size}")
        tag = HopsTag(
            demands=demands,
            total_samples=float(size),
            batch_size=batch_size,
            model=model,
            params=params,
            lr=() if lr is None else (lr,),
            lr_scale=lr_scale,
            types=type_list(types),
            exclude_types=type_list(exclude_types),
            no_preempt=no_preempt,
        )
    except (SubmitError, TagError) as exc:
        fail(str(exc), EXIT_USAGE)
    with friendly_errors("cannot submit"):
        managed = _managed(ctx)
        _check_admission(ctx, managed, tag)
        from hopsd.slurm.factory import port_from_config

        config = config_of(ctx)
        port = port_from_config(config)
        if test_only:
            _print_test_only(config, port, tag, as_json)
            return
        args = _sbatch_args(config, managed, tag, extra, info.directives)
        with submitted_copy(info.path, config.notice_signal) as sent:
            job_id = port.submit(SubmitRequest(str(sent), sbatch_args=args, tag=tag))
    _say_submitted(job_id, demands, size, parsable)
