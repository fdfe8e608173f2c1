"""taskfoundry's grading in an exported Harbor task's verifier (`tests/foundry_verifier/`):
`code` grades the agent's repository tree, `answer` its answer file, each with taskfoundry's own
runtime copied beside them (`runtime/`), and `reward` writes the outcome where Harbor reads it.

These files are copied as they are into each exported Harbor task
(`data/export/harbor_tasks/`); they import only the standard library and `runtime/`."""
