"""What a task family declares: the stages that make its candidates, how they are checked, the
environment its attempts run in, how they are scored, its difficulty ladder and how its rewarded
attempts are audited for reward hacks (`audit`, which makes it reviewed).

The pipeline runs the registered families' stages (`families.generation_stages`), and the
stages after them ask a task's family (`families.family_of`) instead of branching on its kind,
so a family is one module plus its registration line.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from data.config import CalibrateConfig, FoundryConfig
from data.endpoints import Endpoint
from data.lake import Lake
from data.llm import LLMClient
from data.records import Consensus, Direction, Gate, ItemStatus, Task, Verdict
from data.runtime.sandbox import Limits
from families.stage import LLMStage, SandboxStage
from generators.checks import CheckFailure
from generators.doc_qa_variants import Material
from generators.knobs import Ladder, Level
from harnesses.base import Harness
from judges.hacks import Audit
from judges.score import Score
from judges.unit_tests import UnitTests

Grader = Callable[[Task, str], Awaitable[Score]]
CARDS = Path(__file__).resolve().parent / "cards"


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


class Family(ABC):
    """A task family. Subclasses set `kinds` and `stages` (and `ladder`, `audit` where they
    apply), implement the abstract hooks and override the defaults that differ."""

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

    @abstractmethod
    async def verify(self, task: Task, passage: str, llm: LLMClient, services: Services) -> Checked:
        """Check a candidate: its verifier holds up and it asks what it should."""

    async def variant(
        self,
        task: Task,
        level: Level,
        direction: Direction,
        material: Material,
        llm: LLMClient,
        services: Services,
    ) -> Task:
        """`task` made at `level` of the ladder (raises `CheckFailure` where it cannot be)."""
        raise NotImplementedError(f"{type(self).__name__} has no difficulty ladder")

    async def sibling(
        self, task: Task, material: Material, llm: LLMClient, services: Services
    ) -> Task:
        """A new task like `task`: from the same source, at the same level, asking something
        else (`foundry loop` makes more of what a policy failed). Raises `CheckFailure` where
        none can be made; a family without a way to make one says `no_sibling_generator`."""
        raise CheckFailure("no_sibling_generator")
