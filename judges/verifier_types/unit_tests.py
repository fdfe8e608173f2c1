"""`unit_tests`: the task's tests run on the attempt's edits in the sandbox, with the outside
check (`judges.unit_tests`, `judges.code_grading`); the code family grades it."""

from __future__ import annotations

from data.records import UnitTestsSpec
from judges.verifier_types.base import VerifierType

TYPE = VerifierType("unit_tests", UnitTestsSpec, None, sandboxed=True)
