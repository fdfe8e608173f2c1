"""Harbor task directories of an exported taskset version (`foundry export --format harbor`,
`data/export/projections/harbor.py`): one folder per task, `task.toml`, `instruction.md`,
`environment/` (the agent's container), `tests/` (a separate verifier container holding what
only the grader may see, and taskfoundry's own grading: `data/export/harbor_verifier/` with
`data/runtime/` copied beside it) and `solution/` (the reference).

- `layout`: names, the split's folder, `task.toml`, the verifier's files;
- `code_tasks`: `unit_tests` tasks, a commit sequence as one Harbor step per checkpoint;
- `answer_tasks`: single-reply `exact_or_f1` tasks;
- `trees`: the repository trees a code task starts from and the reference leaves.
"""
