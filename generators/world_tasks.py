"""Planted tool-use tasks on a simulated world, worked backwards from a known final state.

For each goal (`generators.world_goals`: a change, or a question with its answer) the records
it needs are planted into a fresh snapshot (distractors beside them, `generators.world_plant`),
the generator model writes the user's instruction, and the gold call sequence with the state
it leaves becomes the verifier (`judges.world_state`). A task is offered only when the
verifier's self-check holds on the planted snapshot and the instruction states every value the
solver needs and gives away nothing it should find (the answer, a key the level describes).

Difficulty knobs, a ladder from easiest to hardest: `steps` (goals chained in one instruction),
`distractors` (siblings planted beside each named record) and `ambiguity` (0: the instruction
names every record by its key; 1: by another value of its row, so the solver looks the key up).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from data.config import WorldsConfig
from data.lake import (
    Direction,
    Lineage,
    Message,
    SourceRef,
    Task,
    ToolCall,
    WorldSetup,
    WorldStateSpec,
    seed_for,
)
from data.llm import LLMClient
from data.prompts import load_prompt
from generators.candidates import Candidate, Rejection
from generators.checks import CheckFailure, contains
from generators.knobs import Ladder, Level, repaired
from generators.world_goals import Goal, sample_goals
from generators.world_plant import description, named_records, plant_distractors
from harnesses.world import Snapshot, World, WorldSpec, world_spec
from harnesses.world_agent import opening
from harnesses.world_check import self_check
from harnesses.world_replay import Call, gold_calls, replay

GENERATOR = "world_tasks"
VERSION = "1"
KIND = "world_tool_use"
INSTRUCTION = load_prompt(__file__, "world_instruction")
TRIES = 2  # instruction drafts per goal; the second is told what the first got wrong
GOALS_PER_TASK_DRAWN = 3  # goals drawn per task wanted, so chains and rejections have spares

LADDER = Ladder(
    levels=(
        Level("guided", {"steps": 1, "distractors": 0, "ambiguity": 0}),
        Level("base", {"steps": 1, "distractors": 2, "ambiguity": 0}),
        Level("described", {"steps": 1, "distractors": 2, "ambiguity": 1}),
        Level("two_steps", {"steps": 2, "distractors": 2, "ambiguity": 1}),
    ),
    base="base",
)


class InstructionDraft(BaseModel):
    model_config = ConfigDict(extra="ignore")
    instruction: str = Field(min_length=1, max_length=400)


@dataclass(frozen=True)
class Plan:
    """One task to write: its gold calls, the snapshot it starts from, the answer (questions),
    what the instruction must state and what it must not."""

    calls: list[Call]
    initial: Snapshot
    final: Snapshot  # after the gold calls
    answer: str
    asks: str  # the column a question asks about ("" for changes)
    must_state: list[str]
    must_not_state: list[str]
    described: list[str]  # "orders 88213 as placed_on 2026-11-09", for the writer


@dataclass(frozen=True)
class LoadedWorld:
    """A world as the generator reads it: its id, where it came from and its spec."""

    world_id: str
    origin: str
    spec: WorldSpec


async def generate(
    world: LoadedWorld, llm: LLMClient, config: WorldsConfig, level_name: str = LADDER.base
) -> list[Candidate | Rejection]:
    """Up to `config.tasks_per_world` candidate tasks on `world` at ladder level `level_name`."""
    level = LADDER.level(level_name)
    seed_text, seed = seed_for(GENERATOR, VERSION, world.world_id, level.name)
    spec = world.spec
    snapshot = await asyncio.to_thread(_seed_snapshot, spec)  # DuckDB work: off the event loop
    steps = int(level.knobs["steps"])
    wanted = config.tasks_per_world
    drawn = wanted * steps * GOALS_PER_TASK_DRAWN
    goals = await asyncio.to_thread(sample_goals, spec, snapshot, drawn, seed)
    if not goals:
        return [Rejection("-", "no_goal", "no tool call of this world passes the self-check")]
    results: list[Candidate | Rejection] = []
    for index, chain in enumerate(_chains(goals, steps)):
        if sum(isinstance(r, Candidate) for r in results) >= wanted:
            break
        name = f"goal={index}"
        rng = random.Random(f"{seed_text}/{index}")
        plan = await asyncio.to_thread(_plan, spec, snapshot, chain, level, rng)
        if isinstance(plan, str):
            results.append(Rejection(name, plan, _calls_text(_calls(chain))))
            continue
        results.append(await _candidate(world, plan, level, llm, config, name, seed + index))
    return results


def _seed_snapshot(spec: WorldSpec) -> Snapshot:
    world = World(spec)
    try:
        return world.snapshot()
    finally:
        world.close()


def _chains(goals: list[Goal], steps: int) -> list[list[Goal]]:
    """Goals grouped `steps` at a time in the order drawn, each used once: changes first, and
    a question (while there are any) last."""
    if steps == 1:
        return [[goal] for goal in goals]
    changes = iter([g for g in goals if g.kind == "change"])
    questions = iter([g for g in goals if g.kind == "question"])
    chains = []
    while True:
        head = list(itertools.islice(changes, steps - 1))
        tail = next(questions, None) or next(changes, None)
        if len(head) < steps - 1 or tail is None:
            return chains
        chains.append([*head, tail])


def _calls(chain: list[Goal]) -> list[Call]:
    return [call for goal in chain for call in goal.calls]


def _plan(
    spec: WorldSpec, snapshot: Snapshot, chain: list[Goal], level: Level, rng: random.Random
) -> Plan | str:
    """The plan for a chain of goals at `level`, or why there is none."""
    calls = _calls(chain)
    question = chain[-1] if chain[-1].kind == "question" else None
    initial = plant_distractors(spec, snapshot, calls, int(level.knobs["distractors"]), rng)
    done = replay(spec, initial, calls)
    answer = _answer(done.messages[-1], question.field) if question else ""
    if answer is None:
        return "question_has_no_answer"
    failure = self_check(spec, initial, calls, answer)
    if failure is not None:
        return f"planted_{failure.split(':')[0]}"
    hidden: dict[str, str] = {}  # a key the instruction must not give -> what it gives instead
    described: list[str] = []
    through: list[str] = []  # the values that name the described records
    if int(level.knobs["ambiguity"]) >= 1:
        for named in named_records(spec, initial, calls):
            found = description(spec, initial, named)
            if found:
                hidden[_text(named.value)] = _text(found[0][1])
                described.extend(line for line, _ in found)
                through.extend(_text(value) for _, value in found)
        if not hidden:
            return "no_describing_value"
    must_state = list(dict.fromkeys(through))
    for _, arguments in calls:
        for value in arguments.values():
            text = _text(value)
            stated = hidden.get(text, text)
            if not isinstance(value, bool) and stated not in must_state:
                must_state.append(stated)
    must_not = [*hidden, *([answer] if answer else [])]
    asks = question.field if question else ""
    return Plan(calls, initial, done.final, answer, asks, must_state, must_not, described)


def _answer(result: str, field: str) -> str | None:
    """The value of `field` in a call's result message (the answer to a question asked after
    the changes before it), or None when it has none."""
    row = json.loads(result)
    value = row.get(field) if isinstance(row, dict) else None
    if value is None or isinstance(value, bool | dict | list):
        return None
    return str(value)


async def _candidate(
    world: LoadedWorld,
    plan: Plan,
    level: Level,
    llm: LLMClient,
    config: WorldsConfig,
    name: str,
    seed: int,
) -> Candidate | Rejection:
    feedback, instruction = "", ""
    for attempt in range(TRIES):
        draft = await llm.structured(
            "generator",
            [{"role": "user", "content": _request(world.spec, plan, feedback)}],
            InstructionDraft,
            temperature=0.0 if attempt == 0 else 0.7,
            max_tokens=160,
            seed=seed + attempt,
        )
        instruction = draft.instruction.strip()
        problem = instruction_problem(instruction, plan)
        if problem is None:
            return Candidate(name, _task(world, plan, instruction, level, llm, config, seed))
        feedback = f"Your last instruction was: {instruction!r}. {problem}"
    reason = "instruction_gives_away" if "must not" in feedback else "instruction_omits_value"
    return Rejection(name, reason, f"{instruction!r}: {feedback}"[:600])


async def make_variant(
    task: Task, level: Level, direction: Direction, llm: LLMClient, config: WorldsConfig
) -> Task:
    """A variant of `task` at `level`: the same goals, chained with more goals drawn from its
    world (more steps) or cut to the last ones (fewer), planted and described as the level says,
    with a new instruction. Raises CheckFailure when the level cannot be made of this task."""
    if task.world is None:
        raise CheckFailure("no_world")
    spec = world_spec(task)
    world = LoadedWorld(task.world.world_id, task.source[0].path if task.source else "", spec)
    snapshot = await asyncio.to_thread(_seed_snapshot, spec)
    chain = _goals_of(task)
    steps = int(level.knobs["steps"])
    if steps > len(chain):
        _, seed = seed_for(GENERATOR, VERSION, task.task_id, level.name)
        count = GOALS_PER_TASK_DRAWN * steps
        drawn = await asyncio.to_thread(sample_goals, spec, snapshot, count, seed)
        extra = [g for g in drawn if g.kind == "change" and g.calls[0] not in _calls(chain)]
        chain = [*extra[: steps - len(chain)], *chain]
    chain = chain[-steps:]
    if len(chain) < steps:
        raise CheckFailure("not_enough_goals")
    rng = random.Random(f"{task.task_id}/{level.name}")
    plan = await asyncio.to_thread(_plan, spec, snapshot, chain, level, rng)
    if isinstance(plan, str):
        raise CheckFailure(plan)
    _, seed = seed_for(GENERATOR, VERSION, task.task_id, level.name, "instruction")
    made = await _candidate(world, plan, level, llm, config, "variant", seed)
    if isinstance(made, Rejection):
        raise CheckFailure(made.reason)
    knobs = {k: v for k, v in task.lineage.knobs.items() if k not in ("goal", "asks")}
    knobs.update(goal=made.task.lineage.knobs["goal"], asks=plan.asks)
    lineage = repaired(made.task.lineage, knobs, task, level, direction, LADDER.base)
    return made.task.model_copy(update={"lineage": lineage})


def _goals_of(task: Task) -> list[Goal]:
    """The task's goals: one per gold call, the last a question when the task has an answer."""
    calls = gold_calls(task)
    asks = str(task.lineage.knobs.get("asks", ""))
    return [
        Goal("question", [call], task.answer, asks)
        if task.answer and index == len(calls) - 1
        else Goal("change", [call])
        for index, call in enumerate(calls)
    ]


def instruction_problem(instruction: str, plan: Plan) -> str | None:
    """What is wrong with `instruction` for `plan`: a value it must state and does not, or one
    it must not state and does; None when it is fit."""
    missing = [value for value in plan.must_state if not contains(instruction, value)]
    if missing:
        return "It must state " + ", ".join(repr(v) for v in missing) + " exactly."
    leaked = [value for value in plan.must_not_state if contains(instruction, value)]
    if leaked:
        return "It must not state " + ", ".join(repr(v) for v in leaked) + "."
    return None


def _request(spec: WorldSpec, plan: Plan, feedback: str) -> str:
    tools = {tool.name: tool.description for tool in spec.tools}
    steps = "\n".join(
        f"- {name}({_arguments_text(arguments)}): {tools[name]}" for name, arguments in plan.calls
    )
    question = (
        f"After that, the user asks for the {plan.asks.replace('_', ' ')} (do not say it:"
        f" the assistant has to find it out)."
        if plan.asks
        else "The user asks for these changes; they ask no question."
    )
    return INSTRUCTION.render(
        world=spec.description or spec.name,
        steps=steps,
        question=question,
        must_state=", ".join(repr(v) for v in plan.must_state) or "(nothing)",
        described="; ".join(plan.described) or "(none: name records by their ids)",
        feedback=feedback,
    ).strip()


def _task(
    world: LoadedWorld,
    plan: Plan,
    instruction: str,
    level: Level,
    llm: LLMClient,
    config: WorldsConfig,
    seed: int,
) -> Task:
    spec = world.spec
    prompt = [Message.model_validate(m) for m in opening(spec, instruction)]
    gold = [ToolCall(name=name, arguments=arguments) for name, arguments in plan.calls]
    verifier = WorldStateSpec(tool_calls=gold, final_state=plan.final)
    setup = WorldSetup(
        world_id=world.world_id,
        spec=spec.model_dump_json(exclude_defaults=True),
        initial=plan.initial,
        max_turns=config.max_turns,
    )
    return Task(
        task_id=Task.make_id(KIND, prompt, plan.answer, verifier, world=setup),
        kind=KIND,
        prompt=prompt,
        answer=plan.answer,
        verifier=verifier,
        evidence=[],
        source=[SourceRef(source_id=world.world_id, path=world.origin, chunk_id="")],
        lineage=Lineage(
            generator=GENERATOR,
            generator_version=VERSION,
            prompt_hash=INSTRUCTION.version,
            model=llm.model("generator"),
            seed=f"{GENERATOR}/{VERSION}/{world.world_id}/{seed}",
            knobs={
                "level": level.name,
                **level.knobs,
                "goal": _goal_kinds(plan),
                "asks": plan.asks,
            },
        ),
        world=setup,
    )


def _goal_kinds(plan: Plan) -> str:
    return "+".join(name for name, _ in plan.calls) + ("?" + plan.asks if plan.asks else "")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _arguments_text(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={json.dumps(v)}" for k, v in arguments.items())


def _calls_text(calls: list[Call]) -> str:
    return "; ".join(f"{name}({_arguments_text(arguments)})" for name, arguments in calls)
