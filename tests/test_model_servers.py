"""`resolve_endpoints` checks every server before a stage runs: a server that cannot be used is
one line naming the cause and the setting to change; what a server accepts (structured-output
mode, `n`, native tool calls) is found by asking it, not by hand-set flags."""

from __future__ import annotations

from pathlib import Path

import pytest

from data.config import FoundryConfig, load_config
from data.llm import EndpointError, free_port, resolve_endpoints
from data.llm import servers as model_servers
from tests.fakes.openai_server import FakeOpenAIServer


def resolved(config: FoundryConfig) -> tuple[dict, list[str]]:
    said: list[str] = []
    with resolve_endpoints(config, Path("/unused"), said.append) as endpoints:
        return endpoints, said


def env_config(monkeypatch, url: str, **env: str) -> FoundryConfig:
    """The configuration `OPENAI_BASE_URL=url` (and `env`) gives, with one retry per request."""
    monkeypatch.setenv("OPENAI_BASE_URL", url)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    config = load_config(None, Path("/unused-home"))
    fast = {"max_retries": 1, "timeout_s": 5.0}
    roles = config.roles.model_copy(
        update={
            "generator": config.roles.generator.model_copy(update=fast),
            "solver": config.roles.solver.model_copy(update=fast),
            "judges": [j.model_copy(update=fast) for j in config.roles.judges],
        }
    )
    return config.model_copy(update={"roles": roles})


def test_a_llama_cpp_server_is_asked_as_json_object_with_its_schema(monkeypatch):
    with FakeOpenAIServer(lambda body: '{"ok": true}', llama_cpp=True) as server:
        endpoints, said = resolved(env_config(monkeypatch, server.base_url))
        refused = server.served.count("refused")

    assert {e.structured_output for e in endpoints.values()} == {"json_object_schema"}
    assert {e.supports_n for e in endpoints.values()} == {False}  # it ignores n
    assert {e.model for e in endpoints.values()} == {"fake-model"}  # the first it lists
    assert refused == 1  # one probe, shared by every role on the server; never retried
    (line,) = said
    assert "(generator, solver, judge:0)" in line
    assert "structured output json_object + schema, n: no, tool calls: no" in line


def test_an_openai_style_server_keeps_json_schema_and_n(monkeypatch):
    with FakeOpenAIServer(lambda body: '{"ok": true}') as server:
        config = env_config(monkeypatch, server.base_url)
        generator = config.roles.generator.model_copy(update={"max_concurrency": 3})
        roles = config.roles.model_copy(update={"generator": generator})
        endpoints, said = resolved(config.model_copy(update={"roles": roles}))

    assert {(e.structured_output, e.supports_n) for e in endpoints.values()} == {
        ("json_schema", True)
    }
    assert len(said) == 1  # one probe for the server, each role its own settings
    assert (endpoints["generator"].max_concurrency, endpoints["solver"].max_concurrency) == (3, 8)


def test_configured_capabilities_are_not_probed_away(monkeypatch):
    with FakeOpenAIServer(lambda body: '{"ok": true}') as server:
        config = env_config(monkeypatch, server.base_url)
        solver = config.roles.solver.model_copy(
            update={
                "json_schema": False,
                "supports_n": False,
                "price_input_per_mtok": 0.2,
                "temperature": 0.7,
                "seed": 3,
            }
        )
        roles = config.roles.model_copy(update={"solver": solver})
        endpoints, _ = resolved(config.model_copy(update={"roles": roles}))

    assert (endpoints["solver"].structured_output, endpoints["solver"].supports_n) == (
        "json_object_schema",
        False,
    )
    assert endpoints["generator"].structured_output == "json_schema"
    solver = endpoints["solver"]  # the role's own settings are kept
    assert (solver.price_input_per_mtok, solver.temperature, solver.seed) == (0.2, 0.7, 3)
    assert solver.max_retries == 1


def calls_the_offered_tool(body: dict) -> str | dict:
    """A model that calls the first tool it is offered, and else replies `{"ok": true}`."""
    if not body.get("tools"):
        return '{"ok": true}'
    name = body["tools"][0]["function"]["name"]
    return {"tool_calls": [{"id": "call-1", "name": name, "arguments": '{"ready": true}'}]}


def probes_with_tools(server: FakeOpenAIServer) -> list[dict]:
    return [body for body in server.requests if body.get("tools")]


def test_a_server_that_returns_tool_calls_is_probed_yes(monkeypatch):
    with FakeOpenAIServer(calls_the_offered_tool) as server:
        endpoints, said = resolved(env_config(monkeypatch, server.base_url))
        (probe,) = probes_with_tools(server)

    assert {e.tool_calls for e in endpoints.values()} == {True}
    assert said[0].endswith("n: yes, tool calls: yes")
    assert [t["function"]["name"] for t in probe["tools"]] == [model_servers.PROBE_TOOL_NAME]
    assert "tool_choice" not in probe  # left to the model, as the world solver leaves it


def test_a_server_that_never_returns_tool_calls_is_probed_no(monkeypatch):
    """llama.cpp's server: the tools are not shown to the model unless `tool_choice` names one,
    so the same model answers in text."""
    with FakeOpenAIServer(calls_the_offered_tool, tool_calls="never") as server:
        endpoints, said = resolved(env_config(monkeypatch, server.base_url))
        probes = probes_with_tools(server)

    assert {e.tool_calls for e in endpoints.values()} == {False}
    assert said[0].endswith("tool calls: no") and len(probes) == 1


def test_a_server_that_refuses_tools_is_probed_no_without_retrying(monkeypatch):
    """llama.cpp's C++ server without `--jinja` answers `tools` with HTTP 500 "tools param
    requires --jinja flag": a refusal, not a transient fault."""
    with FakeOpenAIServer(calls_the_offered_tool, tool_calls="refused") as server:
        endpoints, said = resolved(env_config(monkeypatch, server.base_url))
        refused = server.served.count("refused")

    assert {e.tool_calls for e in endpoints.values()} == {False}
    assert said[0].endswith("tool calls: no")
    assert refused == 1  # asked once, never retried


def test_a_configured_tool_call_flag_is_not_probed(monkeypatch):
    with FakeOpenAIServer(calls_the_offered_tool, tool_calls="never") as server:
        config = env_config(monkeypatch, server.base_url)
        solver = config.roles.solver.model_copy(update={"tool_calls": True})
        roles = config.roles.model_copy(update={"solver": solver})
        endpoints, said = resolved(config.model_copy(update={"roles": roles}))
        probes = probes_with_tools(server)

    assert endpoints["solver"].tool_calls is True  # as configured
    assert endpoints["generator"].tool_calls is False  # probed
    assert len(probes) == 1 and len(said) == 2  # the generator's probe only


def test_a_closed_port_names_the_url_and_its_setting(monkeypatch):
    url = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(EndpointError) as caught:
        resolved(env_config(monkeypatch, url))

    message = str(caught.value)
    assert "cannot reach the model server" in message
    assert url in message and message.endswith("set OPENAI_BASE_URL")


def test_a_server_that_refuses_every_request_is_unusable(monkeypatch):
    monkeypatch.setattr(model_servers, "PROBE_MIN_RETRIES", 2)  # (6 by default: 20 s of backoff)
    with FakeOpenAIServer(faults=["503"] * 20) as server:
        with pytest.raises(EndpointError, match="failed a probe request \\(http_503"):
            resolved(env_config(monkeypatch, server.base_url))
        assert len(server.requests) == 3  # at least the probe's retries, whatever the role's


def test_a_wrong_key_names_the_key_setting(monkeypatch):
    refused = "refused the API key \\(HTTP 401\\); set OPENAI_API_KEY"
    with FakeOpenAIServer(api_key="right") as server, pytest.raises(EndpointError, match=refused):
        resolved(env_config(monkeypatch, server.base_url, OPENAI_API_KEY="wrong"))


def test_an_unknown_model_names_what_is_served_and_the_model_setting(monkeypatch):
    with (
        FakeOpenAIServer(strict_model=True) as server,
        pytest.raises(EndpointError) as caught,
    ):
        resolved(env_config(monkeypatch, server.base_url, FOUNDRY_MODEL="no-such-model"))

    message = str(caught.value)
    assert "does not serve model 'no-such-model' (it serves fake-model)" in message
    assert message.endswith("set FOUNDRY_MODEL")


def test_a_role_in_the_config_file_is_named_by_its_section():
    closed = {"base_url": f"http://127.0.0.1:{free_port()}/v1", "max_retries": 0}
    with FakeOpenAIServer() as server:
        working = {"base_url": server.base_url}
        config = FoundryConfig(
            roles={"generator": working, "solver": working, "judges": [working, closed]}
        )
        named = "judge:1: .*set \\[\\[roles.judges\\]\\] #2 base_url"
        with pytest.raises(EndpointError, match=named):
            resolved(config)
