"""Commit replay: a real commit's change taken away; its own tests, hidden from the solver,
must pass again (fail-to-pass) without breaking the rest (pass-to-pass). Generation: the
commits are replayed in the sandbox (`families.code_stages.replay_commits`), then the `describe`
stage writes each replayed commit's statement. See `families.code`."""

from families.code import CodeFamily
from families.code_stages import DESCRIBE, REPLAY


class CommitReplay(CodeFamily):
    kinds = ("commit_replay",)
    sandbox_stages = (REPLAY,)
    stages = (DESCRIBE,)


FAMILY = CommitReplay()
