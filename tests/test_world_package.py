"""World tasks in the verifiers v1 taskset package: the package ships taskfoundry's own world
runtime, `vf-validate` passes on it, and its reward grades the same completions as
`judges.verifier_types.trainer_rewards.verifier_reward`, in the verifiers library's own
virtualenv."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from data.export import module_name, packaged, taskset_id, write_package
from data.lake import content_id
from data.runtime import world_runtime
from generators.world_tasks import Candidate
from harnesses.world_check import wrong_variants
from judges.verifier_types import package_graders
from judges.verifier_types.trainer_rewards import verifier_reward
from tests.exported_files import projected_rows
from tests.test_world_tasks import SHOP, TRAVEL, generated

ROOT = Path(__file__).resolve().parent.parent
VERIFIERS_PYTHON = Path(
    os.environ.get("FOUNDRY_VERIFIERS_PYTHON", ROOT / ".venv-verifiers" / "bin" / "python")
).absolute()  # absolute, not resolved: the venv's python is a symlink whose target knows no venv
needs_verifiers = pytest.mark.skipif(
    not VERIFIERS_PYTHON.exists(),
    reason=f"the verifiers virtualenv ({VERIFIERS_PYTHON}) is missing: run `make test`",
)


def installed(package: Path, tmp_path: Path, **extra: str) -> dict[str, str]:
    """Install `package` into a folder of its own for the verifiers virtualenv; returns the
    environment (with `extra`) its Python finds it in."""
    site = tmp_path / "site"
    install = [VERIFIERS_PYTHON, "-m", "pip", "install", "-q", "--no-deps"]
    install += ["--no-build-isolation", "--target", site, package]
    subprocess.run([str(a) for a in install], check=True, timeout=300)
    return {**os.environ, "PYTHONPATH": str(site), **extra}


def verifiers_run(
    command: list[Any], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    """`command` in the verifiers virtualenv's environment `env`; it must succeed."""
    done = subprocess.run(
        [str(a) for a in command], capture_output=True, text=True, timeout=300, env=env, cwd=cwd
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    return done


def verifiers_figures(script: str, args: list[Any], env: dict[str, str], cwd: Path) -> Any:
    """The JSON line a check script of tests/ prints, run with the verifiers Python."""
    done = verifiers_run([VERIFIERS_PYTHON, ROOT / "tests" / script, *args], env, cwd)
    return json.loads(done.stdout.strip().splitlines()[-1])


def world_rows() -> list[dict[str, Any]]:
    """The planted tasks of both bundled worlds as canonical taskset rows."""
    rows = []
    for path in (SHOP, TRAVEL):
        for result in generated(path):
            if isinstance(result, Candidate):
                task = result.task
                rows.append(
                    {
                        "task_id": task.task_id,
                        "kind": task.kind,
                        "prompt": [m.model_dump(include={"role", "content"}) for m in task.prompt],
                        "answer": task.answer,
                        "verifier": task.verifier.model_dump_json(),
                        "pass_rate": 0.5,
                        "band": "in_band",
                        "pool": "normal",
                        "harness": "world_tools",
                        "world": task.world.model_dump_json(),
                        "environment": None,
                        "workspace": None,
                        "split": "train",
                    }
                )
    return rows


def cases_of(row: dict[str, Any]) -> dict[str, list[dict[str, Any]]]:
    """Completions as turns (tool calls, or a reply): the gold calls then the answer, a
    plausible wrong call sequence (`wrong_variants`: one argument pointing at another record)
    with a wrong answer, an empty reply, and a net cast for the gold calls (a wildcard call
    beside them, or the gold calls five times over) with the gold answer."""
    setup, verifier = json.loads(row["world"]), json.loads(row["verifier"])
    spec = world_runtime.WorldSpec.model_validate_json(setup["spec"])
    gold = [(c["name"], c["arguments"]) for c in verifier["tool_calls"]]
    variants = wrong_variants(spec, setup["initial"], gold)
    finals = world_runtime.replay_each(spec, setup["initial"], variants)
    wrong = next(
        (
            v
            for v, done in zip(variants, finals, strict=True)
            if done.final != verifier["final_state"]
        ),
        gold[:-1],
    )
    with_arguments = [(name, arguments) for name, arguments in gold if arguments]
    if with_arguments:
        name, arguments = with_arguments[0]
        net = [(name, {**arguments, next(iter(arguments)): "%"}), *gold]
    else:
        net = gold * 5
    return {
        "gold": [{"calls": gold}, {"reply": row["answer"] or "Done."}],
        "wrong": [{"calls": wrong}, {"reply": "zzz qqq unrelated"}],
        "empty": [{"reply": ""}],
        "net": [{"calls": net}, {"reply": row["answer"] or "Done."}],
    }


def conversation(turns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns as a trainer's conversational completion (OpenAI messages)."""
    messages: list[dict[str, Any]] = []
    for index, turn in enumerate(turns):
        if "calls" not in turn:
            messages.append({"role": "assistant", "content": turn["reply"]})
            continue
        ids = [f"call-{index}-{n}" for n in range(len(turn["calls"]))]
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": i,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(arguments)},
                    }
                    for i, (name, arguments) in zip(ids, turn["calls"], strict=True)
                ],
            }
        )
        messages += [{"role": "tool", "tool_call_id": i, "content": "{}"} for i in ids]
    return messages


@pytest.fixture(scope="module")
def world_package(tmp_path_factory) -> tuple[Path, list[dict[str, Any]], dict[str, int]]:
    """The package of a taskset version of the bundled worlds' planted tasks."""
    root = tmp_path_factory.mktemp("world-package")
    version = root / "v1"
    version.mkdir()
    (version / "manifest.json").write_text(json.dumps({"name": "worlds", "version": "v1"}))
    rows = world_rows()
    skipped = write_package(root / "taskset", version, rows, package_graders())
    return root / "taskset", rows, skipped


def shipped_as_it_is(copy: Path) -> bool:
    """Whether `copy` holds the runtime package's every source file, byte for byte."""
    runtime = Path(world_runtime.__file__).parent
    sources = {
        path.relative_to(runtime): path.read_bytes()
        for path in runtime.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    copied = {
        path.relative_to(copy): path.read_bytes()
        for path in copy.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }
    return len(sources) > 20 and copied == sources


def test_the_package_holds_the_world_tasks_and_ships_the_runtime_as_it_is(world_package):
    package, rows, skipped = world_package
    version = package.parent / "v1"
    assert (
        rows
        and skipped == {}
        and all(packaged(row, version, package_graders()) is None for row in rows)
    )
    module = package / module_name("worlds")
    assert shipped_as_it_is(module / "runtime")
    readme = (package / "README.md").read_text()
    assert f"| world_tool_use | world | {len(rows)} |" in readme and "Left out: none." in readme
    packaged_rows = projected_rows(module)
    limits = [json.loads(row["world"])["max_turns"] for row in rows]
    assert [row["max_turns"] for row in packaged_rows] == limits  # the world's turn limit
    spec = world_runtime.WorldSpec.model_validate_json(json.loads(rows[0]["world"])["spec"])
    digest = content_id("world", spec.model_dump(mode="json"))[:8]
    assert spec.world_id == f"{spec.name}@{spec.version}#{digest}"  # the hash taskfoundry keeps


@needs_verifiers
def test_the_package_and_verifier_reward_grade_world_completions_alike(world_package, tmp_path):
    package, rows, _ = world_package
    env = installed(package, tmp_path)
    cases = {row["task_id"]: cases_of(row) for row in rows}
    (tmp_path / "cases.json").write_text(json.dumps(cases))
    ident = taskset_id("worlds")
    figures = verifiers_figures("verifiers_world_check.py", [ident, "cases.json"], env, tmp_path)
    assert set(figures["rewards"]) == set(cases) and all(figures["validated"].values())

    for row in rows:
        names = list(cases[row["task_id"]])
        rewards = verifier_reward(
            [row["prompt"]] * len(names),
            [conversation(cases[row["task_id"]][name]) for name in names],
            [row["verifier"]] * len(names),
            answer=[row["answer"]] * len(names),
            world=[row["world"]] * len(names),
        )
        assert rewards == [1.0, 0.0, 0.0, 0.0]  # gold, wrong, empty, net
        assert [figures["rewards"][row["task_id"]][name] for name in names] == rewards

        setup = json.loads(row["world"])
        spec = world_runtime.WorldSpec.model_validate_json(setup["spec"])
        gold = [(n, a) for turn in cases[row["task_id"]]["gold"] for n, a in turn.get("calls", [])]
        done = world_runtime.replay(spec, setup["initial"], gold)
        listed, *results = figures["tools"][row["task_id"]]
        assert listed == [[tool.name for tool in spec.tools]]
        assert results == [[False, message] for message in done.messages]

    validate = [VERIFIERS_PYTHON.parent / "vf-validate", ident, "--runtime.type", "subprocess"]
    verifiers_run([*validate, "--rich", "false", "-o", tmp_path / "validate"], env, tmp_path)
    (summary,) = (tmp_path / "validate").glob("*/summary.json")
    outcomes = json.loads(summary.read_text())["outcomes"]
    assert outcomes["valid"] == len(rows) and sum(outcomes.values()) == len(rows)  # gold + noop
