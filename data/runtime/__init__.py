"""The runtime room: the code that runs inside exported environments, as it runs here.

Answer matching (`answer_match`), the document-search index (`corpus_index`), the call checks
and the replay and world runtimes (`call_checks`, `replay_runtime`, `world_runtime`), workspace
bundles (`workspace_bundle`), and code grading with everything it runs on: the sandbox
(`sandbox`), edits, trials, test runners and their boot files (`pytest_boot/`, `node_boot/`),
the outside check and the grader-reach audit. It imports nothing of taskfoundry's outside this
package (relative imports only), so the verifiers package export copies it whole, unchanged
(`data/export/verifiers_package.py`); everything else imports it as `data.runtime`.
"""
