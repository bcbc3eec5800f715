"""Typed errors raised by the core, so callers can tell bad input from solver trouble."""


class HopsError(Exception):
    """Base class of every error hops raises on purpose."""


class InvalidInputError(HopsError, ValueError):
    """Input that cannot describe a real cluster or job (negative GPUs, empty demand set...)."""


class UnknownGpuTypeError(InvalidInputError):
    """A node, job or table names a GPU type the cluster does not have."""


class InfeasibleDemandError(InvalidInputError):
    """A job asks for more GPUs than any configuration of the cluster can give."""


class SolverError(HopsError):
    """The MILP solver failed in a way that is not an ordinary infeasibility."""


class MissingExtraError(InvalidInputError):
    """A feature whose library is an optional extra of the slim install was asked for."""


def missing_extra(what: str, library: str, extra: str) -> MissingExtraError:
    """The one-line error for ``what`` when ``library`` (installed by ``extra``) is absent."""
    return MissingExtraError(
        f"{what} needs {library}, which the slim install leaves out: "
        f"pip install 'hops-scheduler[{extra}]'"
    )
