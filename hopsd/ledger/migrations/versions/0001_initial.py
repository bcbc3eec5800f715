"""Initial ledger schema: jobs, rounds, allocations, intents, throughput, usage, lease.

Enumerations are plain strings guarded by CHECK constraints whose value lists
are frozen here (a migration must not import the models it migrates).

Revision ID: 0001
Revises:
Created: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "daemon_lease",
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=256), nullable=True),
        sa.Column("acquired_at", sa.Float(), nullable=True),
        sa.Column("heartbeat_at", sa.Float(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_daemon_lease")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("slurm_job_id", sa.Integer(), nullable=True),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("account", sa.String(length=64), nullable=False),
        sa.Column("script_path", sa.Text(), nullable=False),
        sa.Column("demands", sa.JSON(), nullable=False),
        sa.Column("total_samples", sa.Float(), nullable=False),
        sa.Column("batch_size", sa.Integer(), nullable=False),
        sa.Column("model_name", sa.String(length=128), nullable=False),
        sa.Column("params", sa.Float(), nullable=False),
        sa.Column("lr", sa.Float(), nullable=True),
        sa.Column("lr_rule", sa.String(length=16), nullable=False),
        sa.Column("lr_by_demand", sa.JSON(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("state_reason", sa.Text(), nullable=False),
        sa.Column("state_changed_at", sa.Float(), nullable=False),
        sa.Column("submit_time", sa.Float(), nullable=False),
        sa.Column("first_start_time", sa.Float(), nullable=True),
        sa.Column("end_time", sa.Float(), nullable=True),
        sa.Column("wait_time", sa.Float(), nullable=False),
        sa.Column("service_gpu_s", sa.Float(), nullable=False),
        sa.Column("service_norm", sa.Float(), nullable=False),
        sa.Column("restarts", sa.Integer(), nullable=False),
        sa.Column("samples_done", sa.Float(), nullable=False),
        sa.Column("estimate_source", sa.String(length=16), nullable=True),
        sa.Column("tag_status", sa.String(length=16), nullable=False),
        sa.Column("tag_reason", sa.Text(), nullable=False),
        sa.Column("current_gpu_type", sa.String(length=64), nullable=True),
        sa.Column("current_parts", sa.JSON(), nullable=True),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.CheckConstraint("lr_rule IN ('none', 'linear', 'sqrt')", name=op.f("ck_jobs_lr_rule")),
        sa.CheckConstraint(
            "state IN ('submitted', 'profiling', 'queued', 'running', 'preempted', "
            "'requeued', 'done', 'failed', 'cancelled')",
            name=op.f("ck_jobs_state"),
        ),
        sa.CheckConstraint(
            "tag_status IN ('unchecked', 'valid', 'invalid')", name=op.f("ck_jobs_tag_status")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
        sa.UniqueConstraint("slurm_job_id", name=op.f("uq_jobs_slurm_job_id")),
    )
    op.create_index("ix_jobs_state", "jobs", ["state"], unique=False)
    op.create_index("ix_jobs_user", "jobs", ["user"], unique=False)
    op.create_table(
        "rounds",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("queued", sa.Integer(), nullable=False),
        sa.Column("running", sa.Integer(), nullable=False),
        sa.Column("window_size", sa.Integer(), nullable=False),
        sa.Column("objective", sa.Float(), nullable=False),
        sa.Column("decision_s", sa.Float(), nullable=False),
        sa.Column("idle_gpus_waiting", sa.Integer(), nullable=False),
        sa.Column("plans", sa.Integer(), nullable=False),
        sa.Column("policy", sa.String(length=32), nullable=False),
        sa.Column("shadow", sa.Boolean(), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_rounds")),
        sa.UniqueConstraint("number", "shadow", name=op.f("uq_rounds_number_shadow")),
    )
    op.create_table(
        "usage",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("user", sa.String(length=64), nullable=False),
        sa.Column("account", sa.String(length=64), nullable=False),
        sa.Column("interval_start", sa.Float(), nullable=False),
        sa.Column("interval_end", sa.Float(), nullable=False),
        sa.Column("gpu_s", sa.Float(), nullable=False),
        sa.Column("gpu_s_norm", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_usage")),
        sa.UniqueConstraint(
            "user", "account", "interval_start", name=op.f("uq_usage_user_account_interval_start")
        ),
    )
    op.create_index("ix_usage_interval_end", "usage", ["interval_end"], unique=False)
    op.create_table(
        "allocations",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("round_id", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.String(length=16), nullable=False),
        sa.Column("gpu_type", sa.String(length=64), nullable=True),
        sa.Column("parts", sa.JSON(), nullable=True),
        sa.Column("total_gpus", sa.Integer(), nullable=False),
        sa.Column("at", sa.Float(), nullable=False),
        sa.CheckConstraint(
            "reason IN ('start', 'keep', 'move', 'preempt', 'end')",
            name=op.f("ck_allocations_reason"),
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_allocations_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["round_id"],
            ["rounds.id"],
            name=op.f("fk_allocations_round_id_rounds"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_allocations")),
    )
    op.create_index("ix_allocations_job_id_at", "allocations", ["job_id", "at"], unique=False)
    op.create_index("ix_allocations_round_id", "allocations", ["round_id"], unique=False)
    op.create_table(
        "intents",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("idempotency_key", sa.String(length=128), nullable=False),
        sa.Column("round_id", sa.Integer(), nullable=True),
        sa.Column("job_id", sa.String(length=64), nullable=True),
        sa.Column("action", sa.String(length=16), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.CheckConstraint(
            "action IN ('update', 'release', 'requeue_hold', 'make_eligible', 'cancel', 'hold')",
            name=op.f("ck_intents_action"),
        ),
        sa.CheckConstraint(
            "state IN ('pending', 'done', 'failed', 'abandoned')", name=op.f("ck_intents_state")
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_intents_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["round_id"],
            ["rounds.id"],
            name=op.f("fk_intents_round_id_rounds"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_intents")),
        sa.UniqueConstraint("idempotency_key", name=op.f("uq_intents_idempotency_key")),
    )
    op.create_index("ix_intents_state", "intents", ["state"], unique=False)
    op.create_table(
        "profiles",
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("gpu_type", sa.String(length=64), nullable=False),
        sa.Column("t_f", sa.Float(), nullable=False),
        sa.Column("t_b", sa.Float(), nullable=False),
        sa.Column("t_u", sa.Float(), nullable=False),
        sa.Column("pattern", sa.Integer(), nullable=False),
        sa.Column("data_p_hit", sa.Float(), nullable=False),
        sa.Column("data_mu_hit", sa.Float(), nullable=False),
        sa.Column("data_sigma_hit", sa.Float(), nullable=False),
        sa.Column("data_mu_miss", sa.Float(), nullable=False),
        sa.Column("data_sigma_miss", sa.Float(), nullable=False),
        sa.Column("wait_p_hit", sa.Float(), nullable=False),
        sa.Column("wait_mu_hit", sa.Float(), nullable=False),
        sa.Column("wait_sigma_hit", sa.Float(), nullable=False),
        sa.Column("wait_mu_miss", sa.Float(), nullable=False),
        sa.Column("wait_sigma_miss", sa.Float(), nullable=False),
        sa.Column("iterations", sa.Integer(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_profiles_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "gpu_type", name=op.f("pk_profiles")),
    )
    op.create_table(
        "throughput",
        sa.Column("job_id", sa.String(length=64), nullable=False),
        sa.Column("layer", sa.String(length=16), nullable=False),
        sa.Column("place", sa.String(length=64), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("per_gpu", sa.Float(), nullable=False),
        sa.Column("observations", sa.Integer(), nullable=False),
        sa.Column("samples", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.CheckConstraint(
            "layer IN ('entity_agg', 'entity_dist', 'type_agg', 'type_dist')",
            name=op.f("ck_throughput_layer"),
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_throughput_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("job_id", "layer", "place", "size", name=op.f("pk_throughput")),
    )


def downgrade() -> None:
    op.drop_table("throughput")
    op.drop_table("profiles")
    op.drop_index("ix_intents_state", table_name="intents")
    op.drop_table("intents")
    op.drop_index("ix_allocations_round_id", table_name="allocations")
    op.drop_index("ix_allocations_job_id_at", table_name="allocations")
    op.drop_table("allocations")
    op.drop_index("ix_usage_interval_end", table_name="usage")
    op.drop_table("usage")
    op.drop_table("rounds")
    op.drop_index("ix_jobs_user", table_name="jobs")
    op.drop_index("ix_jobs_state", table_name="jobs")
    op.drop_table("jobs")
    op.drop_table("daemon_lease")
