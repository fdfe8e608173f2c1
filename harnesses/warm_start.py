"""A warm start for tool use: a few supervised steps on gold episodes before GRPO.

A small policy that has never called a tool through its chat template makes no tool call in
a GRPO group, so every episode is one reply and the tools teach nothing. The warm start shows
it the calls, once per task: each tool task's gold episode is played in its own training
environment (the tool results are the environment's), and every assistant turn of it, with
what came before as the prompt, is one prompt-completion row for TRL's SFTTrainer (loss on
the turn alone, never on a tool result).

Gold episodes: the gold calls of the task's training environment (`Training.gold_calls`: a
world task's gold calls, a tool-replay task's expected calls, a doc-search task's search for
its question and read of its evidence passage) then its answer. A task whose gold episode
does not score 1 with the training reward is not used.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from harnesses.train_environments import Calls, tool_schemas, training_of

Row = dict[str, Any]
Reward = Callable[..., list[float | None]]


@dataclass(frozen=True)
class WarmStart:
    steps: int
    learning_rate: float
    batch_size: int
    calls_only: bool = False  # the turns that call tools alone: the call format, cheaply


def gold_episode(
    row: Row, environment: Any, calls: Calls | None
) -> tuple[list[Row], list[Row]] | None:
    """(prompt, completion) of `row`'s gold episode, `calls` then its answer, played in
    `environment` (an instance of its training environment), as TRL's GRPOTrainer would hold
    it; None without gold calls."""
    if not calls:
        return None
    prompt = [dict(m) for m in row["prompt"]]
    observation = environment.reset(**row)
    if isinstance(observation, str):
        prompt[-1] = {**prompt[-1], "content": prompt[-1]["content"] + observation}
    completion: list[Row] = []
    for name, arguments in calls:
        call = {"type": "function", "function": {"name": name, "arguments": arguments}}
        completion.append({"role": "assistant", "content": "", "tool_calls": [call]})
        result = getattr(environment, name)(**arguments)
        completion.append({"role": "tool", "name": name, "content": str(result)})
    completion.append({"role": "assistant", "content": row["solution"] or "Done."})
    return prompt, completion


def warm_start_rows(
    rows: list[Row],
    names: list[str],
    factories: dict[str, Callable[[], Any]],
    reward: Reward,
    calls_only: bool = False,
) -> list[Row]:
    """SFT rows (prompt, completion, tools) from the gold episodes of the tool rows among
    `rows` (each in the environment `names` gives it) that `reward` scores 1: each assistant
    turn, or with `calls_only` each turn that calls a tool."""
    sft: list[Row] = []
    for row, name in zip(rows, names, strict=True):
        calls = training_of(name).gold_calls(row)
        if not calls:
            continue
        environment = factories[name]()
        episode = gold_episode(row, environment, calls)
        if episode is None:
            continue
        prompt, completion = episode
        columns = {k: [v] for k, v in row.items() if k not in ("prompt", "completion")}
        if reward([prompt], [completion], **columns) != [1.0]:
            continue
        tools = json.dumps(tool_schemas(type(environment)))
        for turn, message in enumerate(completion):
            if message["role"] == "assistant" and (message.get("tool_calls") or not calls_only):
                before = prompt + completion[:turn]
                sft.append({"prompt": before, "completion": [message], "tools": tools})
    return sft


def labelled(tokenizer: Any, row: Row) -> dict[str, list[int]]:
    """A row's tokens as the chat template renders its prompt and completion with its tools,
    and its labels: the completion's tokens, -100 for the prompt's."""
    tools = json.loads(row["tools"])
    prompt = _tokens(tokenizer, row["prompt"], tools, add_generation_prompt=True)
    tokens = _tokens(tokenizer, row["prompt"] + row["completion"], tools)
    if tokens[: len(prompt)] != prompt:
        raise ValueError("the chat template renders the prompt differently before its reply")
    return {"input_ids": tokens, "labels": [-100] * len(prompt) + tokens[len(prompt) :]}


def _tokens(tokenizer: Any, messages: list[Row], tools: list[Any], **kwargs: Any) -> list[int]:
    rendered = tokenizer.apply_chat_template(
        messages, tools=tools or None, tokenize=True, return_dict=True, **kwargs
    )
    return list(rendered["input_ids"])


def warm_start(
    policy: str,
    tokenizer: Any,
    rows: list[Row],
    settings: WarmStart,
    output_dir: Path,
    *,
    bf16: bool,
    seed: int,
) -> str:
    """Train `policy` on `rows` (`warm_start_rows`) for `settings.steps` steps with TRL's
    SFTTrainer (on a GPU in bf16 with `bf16`, else on CPU); returns the folder of the warmed
    policy."""
    from datasets import Dataset
    from transformers import PrinterCallback, TrainerCallback
    from trl import SFTConfig, SFTTrainer

    class StepLine(TrainerCallback):
        """A line per step on stderr (stdout is the command's result)."""

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                print(
                    f"warm start: step {state.global_step}/{state.max_steps}"
                    f" loss {float(logs['loss']):.4f}",
                    file=sys.stderr,
                )

    if not rows:
        raise ValueError("no gold episode to warm start on")
    tokenized = [labelled(tokenizer, row) for row in rows]
    config = SFTConfig(
        output_dir=str(output_dir),
        max_steps=settings.steps,
        per_device_train_batch_size=settings.batch_size,
        learning_rate=settings.learning_rate,
        lr_scheduler_type="constant",
        max_length=None,  # a world's tool schemas alone can fill TRL's default 1,024 tokens
        use_cpu=not bf16,
        bf16=bf16,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=seed,
    )
    trainer = SFTTrainer(
        model=policy,
        args=config,
        train_dataset=Dataset.from_list(tokenized),
        processing_class=tokenizer,
        callbacks=[StepLine()],
    )
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    folder = output_dir / "model"
    trainer.save_model(str(folder))
    tokenizer.save_pretrained(str(folder))
    return str(folder)
