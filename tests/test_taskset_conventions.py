"""A version reads as trainers' and operators' tools expect: its splits are files the Hub and
`datasets` read as splits, no training file of any projection holds an eval task, its card's
front matter is metadata the Hub accepts, and an absent value is a real null."""

from __future__ import annotations

import json
import shutil
import tomllib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import load_dataset
from datasets.utils.metadata import MetadataConfigs
from huggingface_hub import DatasetCard

from data.config import FoundryConfig
from data.export import (
    EVAL,
    HUB_METADATA,
    TRAIN,
    export_taskset,
    module_name,
    read_tasks,
    size_category,
    split_file,
    write_package,
)
from families import export_kinds
from judges.verifier_types import package_graders
from sources import groupings
from tests.exported_files import rewrite_tasks

SIZE_CATEGORIES = json.loads(
    (Path(__import__("datasets").__file__).parent / "utils/resources/size_categories.json")
    .read_text()
)  # fmt: skip


def eval_ids(version: Path) -> set[str]:
    return set(read_tasks(version, EVAL).column("task_id").to_pylist())


def test_the_fixture_has_tasks_on_both_sides(docqa_taskset):
    _, version, _ = docqa_taskset
    manifest = json.loads((version / "manifest.json").read_text())
    assert manifest["split"]["tasks"][TRAIN] > 0 and manifest["split"]["tasks"][EVAL] > 0


def test_load_dataset_on_a_version_gives_its_splits_as_the_card_names_them(docqa_taskset):
    _, version, _ = docqa_taskset
    manifest = json.loads((version / "manifest.json").read_text())
    splits = load_dataset(str(version))
    assert {name: len(rows) for name, rows in splits.items()} == manifest["split"]["tasks"]
    assert set(splits[EVAL]["task_id"]) == eval_ids(version)


def test_no_training_file_of_any_projection_holds_an_eval_task(docqa_taskset):
    _, version, projections = docqa_taskset
    held_out = eval_ids(version)
    train_files = [version / name for name in json.loads(
        (version / "manifest.json").read_text())["split"]["files"][TRAIN]]  # fmt: skip
    train_files += [projections[f].path / split_file(TRAIN) for f in ("trl", "verifiers", "sft")]
    train_files.append(projections["verifiers"].path / "taskset" / module_name("docqa") /
                       split_file(TRAIN))  # fmt: skip
    for path in train_files:
        table = pq.read_table(path)
        ids = table.column("task_id").to_pylist() if "task_id" in table.column_names else [
            json.loads(info)["task_id"] for info in table.column("info").to_pylist()
        ]  # fmt: skip
        assert ids and not set(ids) & held_out, path
    eval_rows = pq.read_table(projections["trl"].path / split_file(EVAL))
    assert set(eval_rows.column("task_id").to_pylist()) == held_out


def test_the_prime_rl_fragment_trains_on_the_train_split_and_declares_the_eval_split(
    docqa_taskset,
):
    _, version, projections = docqa_taskset
    fragment = tomllib.loads((projections["prime-rl"].path / "rl.toml").read_text())
    [train] = fragment["orchestrator"]["train"]["source"]
    [held_out] = fragment["orchestrator"]["eval"]["source"]
    assert train["env"]["taskset"]["split"] == TRAIN
    assert held_out["env"]["taskset"]["split"] == EVAL
    assert train["env"]["taskset"]["id"] == held_out["env"]["taskset"]["id"]
    package = projections["verifiers"].path / "taskset" / module_name("docqa")
    shipped = pq.read_table(package / split_file(EVAL)).column("task_id").to_pylist()
    assert held_out["num_examples"] == len(shipped) and set(shipped) <= eval_ids(version)


def test_the_card_front_matter_is_metadata_the_hub_accepts(docqa_taskset):
    _, version, _ = docqa_taskset
    manifest = json.loads((version / "manifest.json").read_text())
    card = DatasetCard((version / "README.md").read_text())
    metadata = card.data.to_dict()
    assert metadata["license"] in HUB_METADATA["licenses"]
    assert set(metadata["task_categories"]) <= set(HUB_METADATA["task_categories"])
    assert metadata["task_categories"] == ["question-answering", "reinforcement-learning"]
    assert metadata["size_categories"] == [size_category(manifest["n_tasks"])]
    assert set(metadata["size_categories"]) <= set(SIZE_CATEGORIES)
    [config] = MetadataConfigs.from_dataset_card_data(card.data).values()
    stamp = manifest["fingerprint"]
    assert config["data_files"] == [
        {"split": TRAIN, "path": f"data/train-{stamp}-*.parquet"},
        {"split": EVAL, "path": f"data/eval-{stamp}-*.parquet"},
    ]


@pytest.mark.parametrize(
    ("tasks", "label"),
    [(0, "n<1K"), (999, "n<1K"), (1_000, "1K<n<10K"), (99_999, "10K<n<100K"), (10**5, "100K<n<1M")],
)
def test_size_categories_follow_the_hub_s_bounds(tasks, label):
    assert size_category(tasks) == label


def test_the_card_describes_only_the_families_the_version_holds(docqa_taskset):
    _, version, _ = docqa_taskset
    card = (version / "README.md").read_text()
    assert "### Question answering (`doc_qa`)" in card
    for absent in ("### Code", "### Reports", "### Production traces", "### Tool use"):
        assert absent not in card
    assert "task kinds none of whose tasks is here: " in card and "bug_fix" in card
    assert "| `" in card.split("## Licences")[1]  # each source root with its licence


def string_cells(table: pa.Table) -> list[tuple[str, str]]:
    """(column, value) of every string cell of `table`, nested lists and structs included."""
    cells = []
    for name, column in zip(table.column_names, table.columns, strict=True):
        for value in column.to_pylist():
            cells += [(name, text) for text in _strings(value)]
    return cells


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def test_an_absent_value_is_a_real_null_in_every_parquet_file_of_the_version(docqa_taskset):
    _, version, _ = docqa_taskset
    files = sorted(version.rglob("*.parquet"))
    assert len(files) >= 8  # the parts and every projection's files
    for path in files:
        nulls = [name for name, text in string_cells(pq.read_table(path)) if text == "null"]
        assert nulls == [], f"{path.relative_to(version)}: JSON 'null' text in {set(nulls)}"
    rows = read_tasks(version).to_pylist()
    assert all(row["workspace"] is None and row["world"] is None for row in rows)


def test_two_versions_named_alike_load_their_own_rows(docqa_taskset, tmp_path):
    """`datasets` caches a folder's splits by its name and its card (not by its files): every
    taskset's first version is `v0001`, and two versions whose tallies match have the same card
    but for the fingerprint in their file patterns, without which the second folder loaded
    would give the first one's rows."""
    _, version, _ = docqa_taskset
    first = shutil.copytree(version, tmp_path / "a" / "v0001")
    second = shutil.copytree(version, tmp_path / "b" / "v0001")
    manifest = json.loads((second / "manifest.json").read_text())
    stamp, other = manifest["fingerprint"], "0123456789abcdef"
    rows = read_tasks(second).to_pylist()[1:]  # other rows, as another export would hold
    for name in manifest["files"]:
        (second / name).unlink()
    manifest["fingerprint"] = other
    manifest["files"] = [name.replace(stamp, other) for name in manifest["files"]]
    for split, names in manifest["split"]["files"].items():
        manifest["split"]["files"][split] = [name.replace(stamp, other) for name in names]
    (second / "manifest.json").write_text(json.dumps(manifest))
    rewrite_tasks(second, rows)
    (second / "README.md").write_text((first / "README.md").read_text().replace(stamp, other))

    cache = str(tmp_path / "hf-cache")
    loaded = [load_dataset(str(v), cache_dir=cache) for v in (first, second)]
    assert [len(splits[TRAIN]) + len(splits[EVAL]) for splits in loaded] == [
        len(rows) + 1,
        len(rows),
    ]


def test_licences_come_from_configuration_and_an_unknown_id_is_refused(docqa_taskset, tmp_path):
    ctx, version, _ = docqa_taskset
    roots = list(json.loads((version / "manifest.json").read_text())["licenses"]["sources"])
    assert roots and all("/" not in root for root in roots)  # the documents, by their roots
    config = FoundryConfig.model_validate(
        {"export": {"license": "cc-by-4.0", "source_licenses": {roots[0]: "cc-by-sa-4.0"}}}
    )
    licensed = export_taskset(
        ctx.lake, "licensed", tmp_path, kinds=export_kinds(), groupings=groupings(),
        licensing=config.export.licensing(),
    ).path  # fmt: skip
    manifest = json.loads((licensed / "manifest.json").read_text())
    assert manifest["licenses"]["taskset"] == {"license": "cc-by-4.0"}
    assert manifest["licenses"]["sources"][roots[0]]["license"] == "cc-by-sa-4.0"
    card = (licensed / "README.md").read_text()
    assert DatasetCard(card).data.license == "cc-by-4.0"
    assert f"| `{roots[0]}` | " in card and "| cc-by-sa-4.0 |" in card
    unstated = len(roots) - 1
    assert (f"The licence of {unstated} sources is not stated" in card) == bool(unstated)
    with pytest.raises(ValueError, match="not a Hub licence id"):
        FoundryConfig.model_validate({"export": {"license": "MIT License"}})
    with pytest.raises(ValueError, match="needs license_name and license_link"):
        FoundryConfig.model_validate({"export": {"license": "other"}})


def test_the_package_version_follows_the_taskset_version(docqa_taskset, tmp_path):
    _, version, _ = docqa_taskset
    third = shutil.copytree(version, tmp_path / "v0003", ignore=shutil.ignore_patterns("verifiers"))
    manifest = json.loads((third / "manifest.json").read_text()) | {"version": "v0003"}
    (third / "manifest.json").write_text(json.dumps(manifest))
    write_package(tmp_path / "package", third, read_tasks(third).to_pylist(), package_graders())
    project = tomllib.loads((tmp_path / "package" / "pyproject.toml").read_text())["project"]
    assert (project["name"], project["version"]) == ("taskfoundry-docqa", "3.0")
