"""What a task family declares: the stages that make its candidates, how they are checked, the
environment its attempts run in, how they are scored, its difficulty ladder and how its rewarded
attempts are audited for reward hacks (`audit`, which makes it reviewed).

The pipeline runs the registered families' stages (`families.generation_stages`), and the
stages after them ask a task's family (`families.family_of`) instead of branching on its kind,
so a family is one module plus its registration line.

A family loads what its hooks read, as an LLM stage loads its items' inputs: the verify stage
hands `verify` what the family's `load_for_verify` returned for the task, and the repair,
steering and revise stages hand `variant` and `sibling` what its `load_for_variants` returned
(a document family its passages, a code family its repository); the stages load nothing a
family did not ask for.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Generic, Protocol, TypeVar, cast

from data.config import CalibrateConfig, FoundryConfig, Settings, extension_settings
from data.lake import Consensus, Direction, Gate, ItemStatus, Lake, Task, Verdict
from data.llm import Endpoint, LLMClient
from data.runtime.sandbox import Limits
from families.stage import LLMStage, SandboxStage
from generators.checks import CheckFailure
from generators.knobs import Ladder, Level
from harnesses.base import Harness
from judges.hacks import Audit
from judges.score import Score
from judges.unit_tests import UnitTests

Grader = Callable[[Task, str], Awaitable[Score]]
CARDS = Path(__file__).resolve().parent / "cards"
# what a family's `verify` checks a task against (its `load_for_verify`), and what its
# `variant` and `sibling` draw on (its `load_for_variants`): each family's own type
Checks = TypeVar("Checks")
Draws = TypeVar("Draws")


class Services(Protocol):
    """What a family's hooks may use from the running stage (`families.stage.StageContext`)."""

    lake: Lake
    config: FoundryConfig
    harnesses: dict[str, Harness]  # built once per process, by name

    @property
    def unit_tests(self) -> UnitTests: ...

    @property
    def limits(self) -> Limits: ...


@dataclass(frozen=True)
class Checked:
    """A family's verdict on one of its candidates: the verify stage's status, and the judge
    records behind it."""

    state: ItemStatus
    reason: str
    detail: str = ""
    verdicts: list[Verdict] = field(default_factory=list)
    consensus: list[Consensus] = field(default_factory=list)
    gates: list[Gate] = field(default_factory=list)  # a code task's admission gates


class Family(ABC, Generic[Checks, Draws]):
    """A task family. Subclasses set `kinds` and `stages` (and `ladder`, `audit` where they
    apply), implement the abstract hooks and override the defaults that differ. It is generic
    in what its hooks read: `Checks` for `verify`, `Draws` for `variant` and `sibling`, each
    loaded by the family itself (by default nothing: `None`)."""

    kinds: tuple[str, ...] = ()
    # the LLM stages that make its candidates, in the order they run (a stage shared with
    # another family, the same object in both, runs once)
    stages: tuple[LLMStage, ...] = ()
    # the sandbox stages that make the items its LLM stages (or its tasks) start from, run
    # before every LLM stage (a shared one, the same object in both, runs once)
    sandbox_stages: tuple[SandboxStage, ...] = ()
    ladder: Ladder | None = None  # difficulty levels the repair loop moves tasks along
    # how the judge panel is shown its rewarded attempts, the hack patterns it may name and the
    # remedy where one exists (`judges.hacks`); None: its attempts are not reviewed
    audit: Audit | None = None
    # its tasks are made from a production trace (their first source): exports carry the
    # trace's id and intent, and keep a task only while its trace is in the lake
    from_traces: bool = False
    # the dataset card's section on its tasks (`families/cards/<card>.md`) and the Hub task
    # category they fall in: a version's card describes the families it holds
    card: str = ""
    task_category: str = "text-generation"
    # its own settings, if it has any: `[extensions.<its first kind>]` in foundry.toml, read
    # with `settings_in` (the shipped families' are the sections they predate this with:
    # [code], [traces], [worlds], [reports])
    settings: type[Settings] | None = None

    @property
    def extension(self) -> str:
        """The name of its settings' table, `[extensions.<name>]`: its first kind."""
        return self.kinds[0]

    def settings_in(self, config: FoundryConfig) -> Settings:
        """Its `settings`, as `[extensions.<its first kind>]` of `config` gives them."""
        if self.settings is None:
            raise LookupError(f"the {self.extension} family declares no settings")
        return extension_settings(config, self.extension, self.settings)

    def card_text(self) -> str:
        """Its section of the dataset card (empty: it has none)."""
        return (CARDS / f"{self.card}.md").read_text() if self.card else ""

    @property
    def reviewed(self) -> bool:
        """Whether its calibrated attempts go through the review stage (rubric and hacks)."""
        return self.audit is not None

    @abstractmethod
    def environment(self, task: Task, config: FoundryConfig, solver: Endpoint) -> str:
        """The name of the harness an attempt at `task` runs in: the environment its pass rate
        is measured in and its export names for trainers."""

    @abstractmethod
    def harness(self, name: str, services: Services) -> Harness:
        """A new harness called `name` (one this family's `environment` returns)."""

    def attempt_config(self, config: FoundryConfig) -> CalibrateConfig:
        """The calibration settings for this family's attempts (reply limits differ)."""
        return config.calibrate

    def grader(self, services: Services) -> Grader | None:
        """How an attempt is scored; None: by its answer verifier (`judges.equivalence`)."""
        return None

    def load_for_verify(self, services: Services, tasks: Sequence[Task]) -> Mapping[str, Checks]:
        """What `verify` checks each of `tasks` (a batch of this family's tasks) against, by
        task id, read in one go; a task left out is not verified (`input_missing`). By default
        nothing: `None` for each."""
        return cast("Mapping[str, Checks]", dict.fromkeys(t.task_id for t in tasks))

    @abstractmethod
    async def verify(
        self, task: Task, loaded: Checks, llm: LLMClient, services: Services
    ) -> Checked:
        """Check a candidate against what `load_for_verify` loaded for it: its verifier holds
        up and it asks what it should."""

    def load_for_variants(self, services: Services, tasks: Sequence[Task]) -> Mapping[str, Draws]:
        """What `variant` and `sibling` draw on for each of `tasks` (a batch of this family's
        tasks), by task id, read in one go; a task left out is not repaired (`input_missing`).
        By default nothing: `None` for each."""
        return cast("Mapping[str, Draws]", dict.fromkeys(t.task_id for t in tasks))

    async def variant(
        self,
        task: Task,
        level: Level,
        direction: Direction,
        material: Draws,
        llm: LLMClient,
        services: Services,
    ) -> Task:
        """`task` made at `level` of the ladder from `material` (what `load_for_variants`
        loaded for it); raises `CheckFailure` where it cannot be."""
        raise NotImplementedError(f"{type(self).__name__} has no difficulty ladder")

    async def sibling(
        self, task: Task, material: Draws, llm: LLMClient, services: Services
    ) -> Task:
        """A new task like `task`: from the same source, at the same level, asking something
        else (`foundry loop` makes more of what a policy failed). Raises `CheckFailure` where
        none can be made; a family without a way to make one says `no_sibling_generator`."""
        raise CheckFailure("no_sibling_generator")
