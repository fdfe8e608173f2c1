"""Prompt templates kept as `.md` files beside the code that uses them, and the text put into
them: escaped, so it cannot pose as the prompt's own blocks; a conversation spelled out."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from string import Template

from data.lake import TraceMessage


@dataclass(frozen=True)
class Prompt:
    name: str
    template: str

    @property
    def version(self) -> str:
        """A short hash of the template text: changes whenever the prompt changes."""
        return hashlib.sha256(self.template.encode("utf-8")).hexdigest()[:12]

    def render(self, **values: str) -> str:
        """Fill `$name` placeholders; a missing value is an error, not an empty string."""
        return Template(self.template).substitute(values)


def chat_messages(system: Prompt, user: str) -> list[dict[str, str]]:
    """A judge's conversation: `system`'s instructions, then the rendered `user` turn."""
    return [
        {"role": "system", "content": system.template.strip()},
        {"role": "user", "content": user},
    ]


def load_prompt(module_file: str, name: str) -> Prompt:
    """Load `<name>.md` from the folder of `module_file` (pass `__file__`)."""
    path = Path(module_file).with_name(f"{name}.md")
    return Prompt(name=name, template=path.read_text(encoding="utf-8").strip() + "\n")


def escape(text: str) -> str:
    """Neutralise tag-like text so content cannot close or open a delimited block."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def render_conversation(messages: list[TraceMessage]) -> str:
    """A conversation as text for a prompt: each message, tool calls and results spelled out,
    angle brackets escaped."""
    lines = []
    for m in messages:
        if m.role == "system":
            continue
        if m.content.strip():
            lines.append(f"{m.role}: {escape(m.content.strip())}")
        for call in m.tool_calls:
            arguments = json.dumps(call.arguments, ensure_ascii=False, sort_keys=True)
            lines.append(f"assistant calls {call.name} {escape(arguments)}")
    return "\n\n".join(lines)
