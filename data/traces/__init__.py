"""Production traces: their formats (chat JSONL, OpenTelemetry spans, the recording
proxy's records) read into conversations, scrubbed and ingested, and what stats show of them."""

from data.traces.conversation import Conversation, Malformed, moment
from data.traces.formats import discover, read_file
from data.traces.ingest import ingest_traces, scrubbed_trace, scrubber_for
from data.traces.proxy_records import proxy_rollouts, read_proxy_records
from data.traces.report import format_trace_report, trace_report
from data.traces.settings import TracesConfig

__all__ = [
    "Conversation",
    "Malformed",
    "TracesConfig",
    "discover",
    "format_trace_report",
    "ingest_traces",
    "moment",
    "proxy_rollouts",
    "read_file",
    "read_proxy_records",
    "scrubbed_trace",
    "scrubber_for",
    "trace_report",
]
