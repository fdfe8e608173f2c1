"""Commit sequence: consecutive commits to replay in order, each checkpoint verified by that
commit's tests. See `families.code`."""

from families.code import CodeFamily


class CommitSequence(CodeFamily):
    kinds = ("commit_sequence",)


FAMILY = CommitSequence()
