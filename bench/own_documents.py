"""A user's own documents on the embedded default: tasks from real projects' documentation and
from the five office sample files, with where the material was lost.

    .venv/bin/python bench/own_documents.py [--project attrs==26.1.0 ...] [--max-chunks 10]
        [--no-office] [--work DIR]

For each project it downloads the sdist from the package index (`pip download --no-binary`),
takes the `.md` and `.rst` files under its `docs/`, and runs `foundry run` on them in a home of
its own with `bench/own_documents.toml` (document questions only, `--max-chunks` chunks drawn
by id); then the same on the office samples (PDF, DOCX, PPTX, XLSX, notebook:
`tests/sample_formats.py`). It prints, per set: files read, chunks, chunks used, candidates,
tasks verified and exported, the yield per 10 chunks used, the formats tasks came from, any
markup left in an exported question, the run's own explanation where it exported few, and
every exported question with its answer, for a blind look.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from data.export import read_tasks  # noqa: E402
from data.lake import Lake  # noqa: E402
from generators.checks import MARKUP  # noqa: E402
from tests.sample_formats import write_samples  # noqa: E402

PROJECTS = ("attrs==26.1.0", "click==8.5.1", "flask==3.1.3", "jinja2==3.1.6")
OFFICE = ("ferry.pdf", "fares.docx", "fleet.pptx", "timetable.xlsx", "tides.ipynb")
CONFIG = ROOT / "bench" / "own_documents.toml"
FOUNDRY = Path(sys.executable).parent / "foundry"


def project_docs(requirement: str, work: Path) -> list[Path]:
    """The `.md` and `.rst` files under `docs/` of `requirement`'s sdist."""
    folder = work / requirement.replace("==", "-")
    if not list(folder.glob("*.tar.gz")):
        folder.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:"]
            + [requirement, "-d", str(folder)],
            check=True,
        )
        for archive in folder.glob("*.tar.gz"):
            subprocess.run(["tar", "xzf", str(archive), "-C", str(folder)], check=True)
    return sorted(
        p
        for p in folder.rglob("*")
        if p.suffix in (".md", ".rst") and "docs" in p.relative_to(folder).parts
    )


def run(name: str, files: list[Path], home: Path, max_chunks: int) -> dict:
    """`foundry run` on `files`; what it made, read back from the lake and the taskset."""
    home.parent.mkdir(parents=True, exist_ok=True)
    config = home.parent / f"{name}.toml"
    settings = CONFIG.read_text()
    config.write_text(settings.replace("[generate]\n", f"[generate]\nmax_chunks = {max_chunks}\n"))
    started = time.monotonic()
    done = subprocess.run(
        [str(FOUNDRY), "run", *map(str, files), "--home", str(home), "--config", str(config)],
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    lake = Lake(home)

    def count(sql: str) -> int:
        return lake.rows(sql)[0]["n"]

    def items(stage: str, status: str = "%") -> int:
        return lake.rows(
            "SELECT count(*) AS n FROM status WHERE stage = ? AND status LIKE ?", [stage, status]
        )[0]["n"]

    tasks = exported_tasks(home)
    thin = done.stdout.find("tasks exported (fewer")
    explanation = done.stdout[done.stdout.rfind("only ", 0, thin) :] if thin >= 0 else ""
    return {
        "name": name,
        "exit": done.returncode,
        "seconds": round(seconds),
        "files": len(files),
        "read": items("ingest", "done"),
        "chunks": count("SELECT count(*) AS n FROM chunks"),
        "chunks_used": items("generate"),
        "candidates": items("candidate"),
        "verified": items("verify", "done"),
        "exported": len(tasks),
        "formats": sorted({Path(t["source"]).suffix for t in tasks}),
        "markup": [t["question"] for t in tasks if MARKUP.search(t["question"])],
        "tasks": tasks,
        "explanation": explanation.strip(),
    }


def exported_tasks(home: Path) -> list[dict]:
    latest = home / "tasksets" / "docqa" / "latest"
    if not latest.exists():
        return []
    rows = []
    for row in read_tasks(latest.resolve()).to_pylist():
        prompt = json.loads(row["prompt"]) if isinstance(row["prompt"], str) else row["prompt"]
        source = json.loads(row["source"]) if isinstance(row["source"], str) else row["source"]
        rows.append(
            {
                "question": prompt[-1]["content"],
                "answer": row["answer"],
                "band": row["band"],
                "source": source[0]["path"] if source else "",
            }
        )
    return rows


def show(result: dict) -> None:
    used = result["chunks_used"]
    per_10 = 10 * result["exported"] / used if used else 0.0
    print(
        f"{result['name']}: {result['read']} of {result['files']} files read,"
        f" {result['chunks']} chunks, {used} used, {result['candidates']} candidates,"
        f" {result['verified']} verified, {result['exported']} exported"
        f" ({per_10:.1f} per 10 chunks used); formats {', '.join(result['formats']) or '-'};"
        f" markup in exported questions: {len(result['markup'])}; {result['seconds']} s,"
        f" exit {result['exit']}"
    )
    if result["explanation"]:
        print("  " + result["explanation"].replace("\n", "\n  "))
    for task in result["tasks"]:
        print(f"  - {task['question']!r} -> {task['answer']!r} ({task['band']})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--project", action="append", help="name==version (repeatable)")
    parser.add_argument("--max-chunks", type=int, default=10)
    parser.add_argument("--no-office", action="store_true")
    parser.add_argument("--work", type=Path, help="where sdists and homes go (default: a temp dir)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="own-documents-"))
    sets = [
        (requirement.split("==")[0], project_docs(requirement, work / "sdists"))
        for requirement in args.project or PROJECTS
    ]
    if not args.no_office:
        samples = write_samples(work / "office")
        sets.append(("office", [samples[name] for name in OFFICE]))
    for name, files in sets:
        show(run(name, files, work / "homes" / name, args.max_chunks))
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
