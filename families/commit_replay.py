"""Commit replay: a real commit's change taken away; its own tests, hidden from the solver,
must pass again (fail-to-pass) without breaking the rest (pass-to-pass). See `families.code`."""

from families.code import CodeFamily


class CommitReplay(CodeFamily):
    kinds = ("commit_replay",)


FAMILY = CommitReplay()
