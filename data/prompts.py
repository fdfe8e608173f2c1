"""Prompt templates kept as `.md` files beside the code that uses them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from string import Template


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
