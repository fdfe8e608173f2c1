"""Prefect's run logs without the errors the `foundry` command reports itself.

A model server that cannot be used, a configuration error or a stop on a signal ends the
command with one line naming the cause; Prefect would log each with a traceback first. Only the
CLI installs this: runs served to the Prefect UI keep their full logs.
"""

from __future__ import annotations

import logging

from prefect.exceptions import TerminationSignal

from data.config import ConfigError
from data.llm import EmbeddedModelError, EndpointError
from data.runtime import interrupt
from data.runtime.interrupt import Interrupted

REPORTED = (
    KeyboardInterrupt,
    TerminationSignal,
    Interrupted,
    EndpointError,
    EmbeddedModelError,
    ConfigError,
)
RUN_LOGGERS = ("prefect.flow_runs", "prefect.task_runs")


class _DropReported(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if interrupt.requested() and record.levelno >= logging.ERROR:
            return False  # the work the stop cut short (a query, a command): the stop says it
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, REPORTED) and not _about_reported(record)


def _about_reported(record: logging.LogRecord) -> bool:
    """A run's closing line about one of the reported errors or about a stop."""
    message = record.getMessage()
    if message.startswith("Crash detected!"):
        return "signal" in message or "interrupt" in message.lower()
    return "Finished in state" in message and any(e.__name__ in message for e in REPORTED)


def drop_reported_errors() -> None:
    """Keep Prefect's run loggers from logging the errors the CLI reports in one line."""
    for name in RUN_LOGGERS:
        logger = logging.getLogger(name)
        if not any(isinstance(f, _DropReported) for f in logger.filters):
            logger.addFilter(_DropReported())
