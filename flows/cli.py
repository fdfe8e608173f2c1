"""The `foundry` command line.

Exit status: 0 when what could be done was done (items rejected for their content are not
failures); 1 on an unexpected error; 2 for a usage or configuration error (a cost limit on a
run that calls a model with no price included); 3 when a model server the run needs could not
be used; 4 when every LLM call of the run failed; 130 / 143 when stopped by SIGINT / SIGTERM
(what finished is kept, and the next run resumes the rest); 141 when the reader of its output
went away (`foundry stats | head`).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from data.config import ConfigError
from data.lake import utcnow
from data.llm import EmbeddedModelError
from data.runtime import interrupt
from flows.cli_args import (
    EXIT_ALL_CALLS_FAILED,
    EXIT_BROKEN_PIPE,
    EXIT_MODEL_SERVER,
    EXIT_OK,
    EXIT_USAGE,
    QUIET_PREFECT,
    band_of,
    config_of,
    lake_of,
)
from flows.commands import Command, build_parser, command_of
from flows.stops import ended_by_stop


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    command = command_of(args)
    started = utcnow()
    with interrupt.stop_on_signals():
        try:
            code = _dispatch(command, args)
            sys.stdout.flush()  # a reader gone shows here, not after the exit status is set
        except (ConfigError, argparse.ArgumentTypeError) as exc:
            print(f"foundry: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except BrokenPipeError:  # the reader went away (`foundry stats | head`): say no more
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return EXIT_BROKEN_PIPE
        except BaseException as exc:
            if _is_model_server_error(exc):
                print(f"foundry: {exc}", file=sys.stderr)
                return EXIT_MODEL_SERVER
            if not ended_by_stop(exc):
                raise
            interrupt.request(getattr(exc, "signal", signal.SIGINT))  # (set unless Prefect's)
            print(
                "foundry: stopped; what finished is kept in the lake, and the next run resumes"
                " the rest",
                file=sys.stderr,
            )
            return interrupt.exit_code()
    if code == EXIT_OK and command.calls_models:
        return _check_llm_calls(args, started)
    return code


def _is_model_server_error(exc: BaseException) -> bool:
    from data.llm import EndpointError

    return isinstance(exc, EmbeddedModelError | EndpointError)


def _check_llm_calls(args: argparse.Namespace, since) -> int:
    """EXIT_ALL_CALLS_FAILED, with the reasons counted, when the runs this command made
    called model servers and every call failed; else EXIT_OK."""
    from data.lake import failed_calls

    lake = lake_of(args)
    runs = [r["run_id"] for r in lake.runs() if r["started_at"] >= since]
    failed = failed_calls(lake, runs)
    if failed is None:
        return EXIT_OK
    reasons = ", ".join(f"{reason} x{n}" for reason, n in failed.items())
    print(
        f"foundry: every LLM call of this run failed ({reasons}); see `foundry stats` and the"
        " model server's log",
        file=sys.stderr,
    )
    return EXIT_ALL_CALLS_FAILED


def _dispatch(command: Command, args: argparse.Namespace) -> int:
    """Run `command`, which `args` names; its exit status."""
    band_of(getattr(args, "band", None))  # a bad --band is said before anything starts
    if command.flow is None:
        return command.run(args)
    if command.plan is not None and args.plan:
        return command.plan(args)
    from data.plan import check_config
    from flows.stages import check_extensions, check_kinds

    config = config_of(args)  # a configuration error is said before any flow starts
    check_kinds((args.kind if command.takes_kinds else None) or config.scope.kinds)
    check_extensions(config)
    if command.calls_models:  # a cost limit needs every configured model's price
        given = getattr(args, "max_cost", None)
        check_config(config, given if given is not None else config.budget.max_cost_usd)
    for key, value in QUIET_PREFECT.items():
        os.environ.setdefault(key, value)
    # Prefect is imported only for commands that run flows
    from flows.prefect_server import prefect_api
    from flows.quiet_errors import drop_reported_errors

    drop_reported_errors()
    with prefect_api():
        return command.run(args)


if __name__ == "__main__":
    sys.exit(main())
