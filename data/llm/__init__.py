"""Models: the client every stage calls an OpenAI-compatible server through (cache,
retries, structured replies, one limit per server), the endpoints of the roles and the servers
behind them, the embedded model and its build, sentence embeddings, and the policies a
trainer and an evaluation serve."""

from data.llm.cache import ResponseCache, request_key
from data.llm.client import CURRENT_ITEM, REPAIR_OPENING, LLMClient, LLMError, settle
from data.llm.embedded import (
    EMBEDDED_MODEL_ALIAS,
    EmbeddedModelError,
    check_build,
    describe_exit,
    die_with_parent,
    embedded_server,
    free_port,
    locate_gguf,
    stop_process,
    supervised_server,
)
from data.llm.embeddings import DIMENSIONS, as_matrix, embed, near_duplicates
from data.llm.endpoints import Endpoint, priced, role_configs, role_prices, shared_among, unpriced
from data.llm.llama_build import (
    ALWAYS_OFF,
    PACKAGE,
    X86_OPTIONS,
    BuildPlan,
    build_wheel,
    missing_instructions,
    pinned_version,
    plan_build,
    wheelhouse,
)
from data.llm.policy import EMBEDDED, policy_path
from data.llm.replies import Completion, Reply, ToolCallRequest
from data.llm.served_policy import (
    Policy,
    parse_policy,
    served_folder,
    serving,
    weights_hash,
    with_policy,
)
from data.llm.server_limit import ServerLimit
from data.llm.servers import PROBE_MESSAGES, PROBE_TOOL_NAME, EndpointError, resolve_endpoints
from data.llm.settings import EndpointConfig, RolesConfig, solver_pointed_at

__all__ = [
    "ALWAYS_OFF",
    "BuildPlan",
    "CURRENT_ITEM",
    "Completion",
    "DIMENSIONS",
    "EMBEDDED",
    "EMBEDDED_MODEL_ALIAS",
    "EmbeddedModelError",
    "Endpoint",
    "EndpointConfig",
    "EndpointError",
    "LLMClient",
    "LLMError",
    "PACKAGE",
    "PROBE_MESSAGES",
    "PROBE_TOOL_NAME",
    "Policy",
    "REPAIR_OPENING",
    "Reply",
    "ResponseCache",
    "RolesConfig",
    "ServerLimit",
    "ToolCallRequest",
    "X86_OPTIONS",
    "as_matrix",
    "build_wheel",
    "check_build",
    "describe_exit",
    "die_with_parent",
    "embed",
    "embedded_server",
    "free_port",
    "locate_gguf",
    "missing_instructions",
    "near_duplicates",
    "parse_policy",
    "pinned_version",
    "plan_build",
    "policy_path",
    "priced",
    "request_key",
    "resolve_endpoints",
    "role_configs",
    "role_prices",
    "served_folder",
    "serving",
    "settle",
    "shared_among",
    "solver_pointed_at",
    "stop_process",
    "supervised_server",
    "unpriced",
    "weights_hash",
    "wheelhouse",
    "with_policy",
]
