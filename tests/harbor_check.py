"""Run by tests/test_harbor.py with the Harbor virtualenv's Python (Harbor needs Python 3.12):
reads each task directory under the given dataset folders as Harbor does, and prints one JSON
line: per folder, per task directory, its name, its metadata's split and whether Harbor takes it
for a task (`Task.is_valid_dir`, what `harbor run -p FOLDER` lists a local dataset's tasks by).

Usage: python harbor_check.py FOLDER...
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from harbor.models.task.config import TaskConfig
from harbor.models.task.task import Task


def task_figures(folder: Path) -> dict[str, dict]:
    figures = {}
    for task_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
        config = TaskConfig.model_validate_toml((task_dir / "task.toml").read_text())
        figures[task_dir.name] = {
            "name": config.task.name if config.task else None,
            "split": config.metadata.get("split"),
            "valid": Task.is_valid_dir(task_dir),
            "steps": len(config.steps or []),
        }
    return figures


if __name__ == "__main__":
    print(json.dumps({folder: task_figures(Path(folder)) for folder in sys.argv[1:]}))
