"""Verifier specs, one class per verifier type (the `VerifierSpec` union), and how task ids
hash them; each type's behaviour is in `judges/verifier_types/`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, model_validator

from data.lake.records.values import Checkpoint, ToolCall

# Fields of other verifier types hold these when unset, in rows written before the union.
_UNSET: tuple[Any, ...] = ([], None, 0.6)


class _Spec(BaseModel):
    """Base of the verifier specs: frozen, no unknown fields."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    @model_validator(mode="before")
    @classmethod
    def _drop_unset(cls, data: Any) -> Any:
        # old rows carry every type's fields: drop other types' unset ones, refuse the rest
        if not isinstance(data, dict):
            return data
        return {k: v for k, v in data.items() if k in cls.model_fields or v not in _UNSET}


class AnswerSpec(_Spec):
    """An answer compared with the gold one: normalised exact match, or token F1 >=
    `f1_threshold`."""

    f1_threshold: float = 0.6
    # Fill-in-the-blank tasks: the text before and after the blank. An attempt that repeats
    # the whole sentence is cut down to what it put in the blank before it is compared.
    context: list[str] = Field(default_factory=list)
    # Checkable items a passing attempt must also meet (from failed attempts and mined reward
    # hacks). With a rubric, an llm_equivalence verifier accepts only an exact match without
    # asking the panel: a token-F1 match is no longer enough on its own.
    rubric: list[str] = Field(default_factory=list)
    # answers known to fail; an exported taskset package checks that it rejects them
    negatives: list[str] = Field(default_factory=list)


class ExactOrF1Spec(AnswerSpec):
    """The answer match alone."""

    type: Literal["exact_or_f1"] = "exact_or_f1"


class LLMEquivalenceSpec(AnswerSpec):
    """The answer match, and when that fails, the judge panel decides whether the attempt
    means the gold answer."""

    type: Literal["llm_equivalence"] = "llm_equivalence"


class RubricSpec(_Spec):
    """The judge panel decides whether the attempt meets every rubric item (the gold answer is
    a reference, not the only right reply)."""

    type: Literal["rubric"] = "rubric"
    rubric: list[str] = Field(default_factory=list)
    # each item judged on its own (document reports: one item per checkable fact): the reward
    # is the share of items the panel's majority finds met, and only every item met is a pass
    by_item: bool = False
    # answers known to fail (e.g. the production answer a near-miss task was made from); the
    # verifier's self-check makes sure it rejects them
    negatives: list[str] = Field(default_factory=list)


class UnitTestsSpec(_Spec):
    """The attempt is a patch to the task's workspace; it passes when every fail-to-pass test
    passes and every pass-to-pass test still passes (test ids as pytest names them,
    `path::Class::test`)."""

    type: Literal["unit_tests"] = "unit_tests"
    fail_to_pass: list[str] = Field(default_factory=list)
    pass_to_pass: list[str] = Field(default_factory=list)
    # commit sequences: the attempt's steps are applied in order, each followed by its
    # checkpoint; the reward is the share of checkpoints passed (all of them: a pass)
    checkpoints: list[Checkpoint] = Field(default_factory=list)


class _CallsSpec(_Spec):
    """Base of the specs that check an attempt's tool calls."""

    # the calls a passing attempt makes, in order, with the arguments that must match
    # (tool_calls: free-text arguments are left out; world_state: the gold calls)
    tool_calls: list[ToolCall] = Field(default_factory=list)


class ToolCallsSpec(_CallsSpec):
    """The attempt's tool calls must include `tool_calls` in order (names and key arguments)."""

    type: Literal["tool_calls"] = "tool_calls"


class WorldStateSpec(_CallsSpec):
    """The attempt's calls, replayed on the task's world, must leave exactly `final_state`
    (rows per table), the state the gold calls leave; where the task asks a question, its
    answer must also match the gold answer exactly."""

    type: Literal["world_state"] = "world_state"
    final_state: dict[str, list[dict[str, Any]]]


# How an attempt is scored against the gold answer: one spec per verifier type.
VerifierSpec = Annotated[
    ExactOrF1Spec
    | LLMEquivalenceSpec
    | RubricSpec
    | UnitTestsSpec
    | ToolCallsSpec
    | WorldStateSpec,
    Field(discriminator="type"),
]
# parses a spec (a dict, or JSON with `validate_json`) to its type's class
VERIFIER_SPEC: TypeAdapter[VerifierSpec] = TypeAdapter(VerifierSpec)


def hashed_spec(verifier: VerifierSpec) -> dict[str, Any]:
    """The verifier as task ids hash it, in the shape of the single model that held every
    type's fields before the union, so that ids do not change: `type`, `f1_threshold`,
    `context` and `rubric` always (at that model's defaults where the type has none), every
    other field only where it differs from its default."""
    legacy = {"f1_threshold": 0.6, "context": [], "rubric": []}
    return {
        **legacy,
        **verifier.model_dump(mode="json", exclude_defaults=True),
        "type": verifier.type,
    }
