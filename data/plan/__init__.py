"""Planning a run before it starts: its calls, tokens, cost and sandbox time estimated
from its sources and settings, and the price check that refuses a cost limit no price backs."""

from data.plan.defaults import Work, default_calls
from data.plan.estimate import DEFAULT_MARGIN, RunPlan, format_plan, plan_run
from data.plan.price_check import check_config, check_endpoints
from data.plan.sandbox import DEFAULT_TEST_RUN_S, REPLAY_TEST_RUNS, unknown_stages

__all__ = [
    "DEFAULT_MARGIN",
    "DEFAULT_TEST_RUN_S",
    "REPLAY_TEST_RUNS",
    "RunPlan",
    "Work",
    "check_config",
    "check_endpoints",
    "default_calls",
    "format_plan",
    "plan_run",
    "unknown_stages",
]
