"""The spend ledger: written ahead of every paid LLM request, so a crash loses no spend.

A run's live requests each get a `sent` line in `<home>/ledger/<run_id>.jsonl` before the
request leaves (with the most it can cost: its prompt, estimated at four characters a token,
and its `max_tokens`, at the role's prices) and a `settled` line once it is answered or has
failed (its real tokens and cost). The lake's `llm_calls` are written only when a batch ends,
so the ledger is what a run killed mid-batch leaves of its spend: its settled cost, and the
requests sent and never settled (counted at their bound). Lines are appended and flushed one at
a time (each process of a run appends to the same file), so they survive the process being
killed; a machine crash may lose the last ones.

The next run of the same command carries on the budget of the runs before it that did not
finish (`carried_spend`): what a crashed run spent counts against the limits of the run that
resumes its work.

A model with no price (`data.costs.prices`) leaves `bound_usd` and `cost_usd` null: its calls' cost
is unknown, and every sum that includes them is shown as a lower bound (`data.costs.cost`).
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from data.costs.cost import Cost

FOLDER = "ledger"
CHARS_PER_TOKEN = 4  # for a request's bound before it is sent


def ledger_path(home: Path, run_id: str) -> Path:
    return home / FOLDER / f"{run_id}.jsonl"


def open_ledger(path: Path) -> None:
    """Start a run's ledger: a first line naming the process that writes it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    _append(path, {"event": "opened", "pid": os.getpid(), "host": socket.gethostname()})


def record_sent(path: Path, call_id: str, role: str, model: str, bound_usd: float | None) -> None:
    _append(
        path,
        {"event": "sent", "call": call_id, "role": role, "model": model, "bound_usd": bound_usd},
    )


def record_settled(
    path: Path, call_id: str, tokens: int, cost_usd: float | None, error: str
) -> None:
    _append(
        path,
        {
            "event": "settled",
            "call": call_id,
            "tokens": tokens,
            "cost_usd": cost_usd,
            "error": error,
        },
    )


def _append(path: Path, entry: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as ledger:
        ledger.write(json.dumps(entry) + "\n")
        ledger.flush()


@dataclass(frozen=True)
class Spend:
    """What one run's ledger shows: its settled calls, tokens and cost, the requests sent and
    never settled with the most they can have cost, and who wrote it. Calls to models with no
    price add nothing to the sums and name their models in `unpriced` (settled calls) and
    `open_unpriced` (unsettled ones)."""

    settled_calls: int = 0
    tokens: int = 0
    cost_usd: float = 0.0
    open_calls: int = 0
    open_bound_usd: float = 0.0
    pid: int | None = None
    host: str = ""
    unpriced: tuple[str, ...] = ()
    open_unpriced: tuple[str, ...] = ()

    @property
    def at_most_usd(self) -> float:
        """The settled cost and the open requests' bounds, at known prices."""
        return self.cost_usd + self.open_bound_usd

    @property
    def settled(self) -> Cost:
        return Cost.of(self.cost_usd, self.unpriced)

    @property
    def open_bound(self) -> Cost:
        return Cost.of(self.open_bound_usd, self.open_unpriced)

    @property
    def at_most(self) -> Cost:
        return self.settled + self.open_bound


def read_spend(path: Path) -> Spend:
    """A run's ledger summed up (an empty Spend where it has none). A torn last line, left by
    a kill in mid-write, is skipped."""
    if not path.is_file():
        return Spend()
    sent: dict[str, tuple[float | None, str]] = {}  # call -> (its bound, its model)
    models: dict[str, str] = {}
    settled = tokens = 0
    cost = 0.0
    unpriced: set[str] = set()
    pid, host = None, ""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue
        if entry.get("event") == "opened":
            pid, host = entry.get("pid"), entry.get("host", "")
        elif entry.get("event") == "sent":
            sent[entry["call"]] = (entry.get("bound_usd", 0.0), entry.get("model", ""))
            models[entry["call"]] = entry.get("model", "")
        elif entry.get("event") == "settled":
            sent.pop(entry["call"], None)
            settled += 1
            tokens += int(entry.get("tokens", 0))
            spent = entry.get("cost_usd", 0.0)
            if spent is None:
                unpriced.add(models.get(entry["call"], ""))
            else:
                cost += float(spent)
    bounds = [bound for bound, _ in sent.values() if bound is not None]
    open_unpriced = {model for bound, model in sent.values() if bound is None}
    return Spend(
        settled,
        tokens,
        cost,
        len(sent),
        float(sum(bounds)),
        pid,
        host,
        tuple(sorted(unpriced)),
        tuple(sorted(open_unpriced)),
    )


def _still_running(spend: Spend) -> bool:
    """Whether the process that writes a ledger is alive (on this machine; a ledger written on
    another machine is taken as still running)."""
    if spend.pid is None:
        return False
    if spend.host != socket.gethostname():
        return True
    try:
        os.kill(spend.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return spend.pid != os.getpid()


def unfinished_runs(runs: list[dict[str, Any]], command: str) -> list[dict[str, Any]]:
    """The runs of `command` since its last completed one, oldest first, that did not complete
    (failed, interrupted, or killed while `running`)."""
    mine = [r for r in runs if r["command"] == command]
    since = max((i for i, r in enumerate(mine) if r["state"] == "completed"), default=-1)
    return [r for r in mine[since + 1 :] if r["state"] != "completed"]


def carried_spend(home: Path, runs: list[dict[str, Any]], command: str) -> tuple[Spend, int]:
    """What the unfinished runs of `command` before this one spent, as their ledgers show
    (settled cost, and sent requests at their bound), and how many runs that is; a run still
    `running` whose process is alive (another run on the same home) is not counted."""
    total = Spend()
    counted = 0
    for run in unfinished_runs(runs, command):
        spend = read_spend(ledger_path(home, run["run_id"]))
        if run["state"] == "running" and _still_running(spend):
            continue
        counted += 1
        total = _plus(total, spend)
    return total, counted


def ledger_summary(home: Path, runs: list[dict[str, Any]], recorded: dict[str, float]) -> dict:
    """Every run's ledger summed up, and the runs that did not complete apart, with what the
    lake recorded of their spend (`recorded`: cost at known prices by run id)."""
    total = unfinished = Spend()
    n_unfinished = 0
    lost = Cost()
    for run in runs:
        spend = read_spend(ledger_path(home, run["run_id"]))
        total = _plus(total, spend)
        if run["state"] != "completed" and (spend.settled_calls or spend.open_calls):
            n_unfinished += 1
            unfinished = _plus(unfinished, spend)
            beyond = max(0.0, spend.cost_usd - recorded.get(run["run_id"], 0.0))
            lost += Cost.of(beyond, spend.unpriced)
    return {
        "settled_calls": total.settled_calls,
        "tokens": total.tokens,
        **total.settled.to_json(),
        "unfinished_runs": n_unfinished,
        **unfinished.settled.to_json("unfinished_cost_usd", "unfinished_unpriced_models"),
        "unfinished_open_calls": unfinished.open_calls,
        **unfinished.open_bound.to_json(
            "unfinished_open_bound_usd", "unfinished_open_unpriced_models"
        ),
        **lost.to_json("not_in_lake_usd", "not_in_lake_unpriced_models"),
    }


def format_ledger(summary: dict) -> str:
    line = (
        f"spend ledger: {summary['settled_calls']} live requests, {summary['tokens']:,} tokens,"
        f" {Cost.from_json(summary).text()}"
    )
    if summary["unfinished_runs"]:
        settled = Cost.from_json(summary, "unfinished_cost_usd", "unfinished_unpriced_models")
        lost = Cost.from_json(summary, "not_in_lake_usd", "not_in_lake_unpriced_models")
        bound = Cost.from_json(
            summary, "unfinished_open_bound_usd", "unfinished_open_unpriced_models"
        )
        line += (
            f"; {summary['unfinished_runs']} run(s) did not finish: {settled.text()} settled"
            f" ({lost.text()} of it never reached the lake),"
            f" {summary['unfinished_open_calls']} request(s) sent and never answered (at most"
            f" {bound.text()})"
        )
    return line


def _plus(a: Spend, b: Spend) -> Spend:
    return Spend(
        a.settled_calls + b.settled_calls,
        a.tokens + b.tokens,
        a.cost_usd + b.cost_usd,
        a.open_calls + b.open_calls,
        a.open_bound_usd + b.open_bound_usd,
        unpriced=tuple(sorted({*a.unpriced, *b.unpriced})),
        open_unpriced=tuple(sorted({*a.open_unpriced, *b.open_unpriced})),
    )
