"""Commit sequence: consecutive commits to replay in order, each checkpoint verified by that
commit's tests. Generation: the `sequence` stage chains the commit-replay tasks the `describe`
stage made (which it therefore needs too). See `families.code`."""

from families.code import CodeFamily
from families.code_stages import DESCRIBE, REPLAY, SEQUENCE


class CommitSequence(CodeFamily):
    kinds = ("commit_sequence",)
    sandbox_stages = (REPLAY,)
    stages = (DESCRIBE, SEQUENCE)


FAMILY = CommitSequence()
