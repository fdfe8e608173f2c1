"""What counts as a stop, for every command and flow: Ctrl-C or SIGTERM (our handler's
KeyboardInterrupt, a batch's `Interrupted`, or the TerminationSignal Prefect's own SIGTERM
handler raises inside a flow run), and, once a stop was asked for, any failure at all: what
failed was cut short by it. A stop keeps what finished; the next run resumes the rest."""

from __future__ import annotations

import sys

from data.runtime import interrupt


def is_stop(exc: BaseException) -> bool:
    """Whether `exc` is a stop signal itself (Prefect's checked without importing Prefect)."""
    if isinstance(exc, KeyboardInterrupt | interrupt.Interrupted):
        return True
    prefect_exceptions = sys.modules.get("prefect.exceptions")
    return prefect_exceptions is not None and isinstance(exc, prefect_exceptions.TerminationSignal)


def ended_by_stop(exc: BaseException) -> bool:
    """Whether a run that raised `exc` was stopped rather than failed."""
    return is_stop(exc) or interrupt.requested()
