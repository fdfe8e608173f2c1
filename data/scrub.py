"""Scrubbing: secrets and personal data in trace text replaced by typed placeholders.

Runs on every trace before it is stored for generation, so nothing downstream (prompts, tasks,
exports) ever sees the original. What is found is replaced by `[KIND]` (e.g. `[EMAIL]`,
`[API_KEY]`) and counted per kind. Order matters: whole secrets (private-key blocks, bearer
tokens, provider keys) go first, so a phone or card pattern never cuts one in half; card numbers
go before phone numbers and only when their digits pass the Luhn check; phone numbers are found
by libphonenumber (`phonenumbers`), which knows every country's numbering plan far better than a
regular expression would. A placeholder matches no pattern, so scrubbing twice changes nothing.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import phonenumbers

# (kind, pattern), applied in this order
SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "PRIVATE_KEY",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    ),
    ("BEARER_TOKEN", r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*"),
    ("JWT", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("AWS_ACCESS_KEY", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b"),
    (
        "AWS_SECRET_KEY",
        r"(?i)\baws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})\b",
    ),
    (
        "API_KEY",
        r"\b(?:sk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
        r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
        r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
        r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}"  # Stripe
        r"|AIza[A-Za-z0-9_-]{35}"  # Google
        r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
        r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
        r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,})",  # SendGrid
    ),
    ("EMAIL", r"(?i)\b[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}\b"),
    (
        "SECRET",
        r"(?i)\b(?:password|passwd|passphrase|secret|api[_-]?key|access[_-]?token|auth[_-]?token)"
        r"\b[\"']?(?:\s*[:=]\s*|\s+is\s+)[\"']?"
        # a value with a digit or a symbol: "password: change it now" is advice, not a secret
        r"(?P<secret>(?=[^\s\"',;\[]*[\d!@#$%^&*_+=/\\-])[^\s\"',;\[]{6,})",
    ),
)
CARD_CANDIDATE = re.compile(r"(?<![\d-])\d(?:[ -]?\d){12,18}(?![\d-])")


def luhn_valid(digits: str) -> bool:
    """The Luhn checksum that every payment card number satisfies."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = int(char)
        if position % 2:
            value *= 2
            if value > 9:
                value -= 9
        total += value
    return total % 10 == 0


@dataclass
class Scrubber:
    """Replaces secrets and personal data by `[KIND]` placeholders; `custom` adds configured
    patterns (kind -> regular expression), applied after the built-in secrets. A pattern with
    a named group `secret` has only that group replaced (`password: hunter22` ->
    `password: [SECRET]`)."""

    custom: Mapping[str, str] = field(default_factory=dict)
    phone_region: str = "US"  # how numbers without a country code are read

    def __post_init__(self) -> None:
        kinds = [*SECRET_PATTERNS, *((k.upper(), p) for k, p in self.custom.items())]
        self._patterns = [(kind, re.compile(pattern)) for kind, pattern in kinds]

    def scrub(self, text: str, counts: Counter | None = None) -> str:
        """`text` with every finding replaced; findings are added to `counts` by kind."""
        counts = Counter() if counts is None else counts
        for kind, pattern in self._patterns:
            text, found = pattern.subn(lambda m, kind=kind: _replace(m, kind), text)
            counts[kind] += found
        text = CARD_CANDIDATE.sub(lambda m: self._card(m, counts), text)
        return self._phones(text, counts)

    def scrub_value(self, value: Any, counts: Counter) -> Any:
        """Every string inside a JSON-like value scrubbed (dict keys too), structure kept."""
        if isinstance(value, str):
            return self.scrub(value, counts)
        if isinstance(value, list | tuple):
            return [self.scrub_value(v, counts) for v in value]
        if isinstance(value, dict):
            return {
                self.scrub(str(k), counts): self.scrub_value(v, counts) for k, v in value.items()
            }
        return value

    @staticmethod
    def _card(match: re.Match[str], counts: Counter) -> str:
        digits = re.sub(r"\D", "", match.group())
        if not luhn_valid(digits):
            return match.group()
        counts["CARD"] += 1
        return "[CARD]"

    def _phones(self, text: str, counts: Counter) -> str:
        if sum(c.isdigit() for c in text) < 7:
            return text
        found = phonenumbers.PhoneNumberMatcher(
            text, self.phone_region, leniency=phonenumbers.Leniency.POSSIBLE
        )
        pieces, last = [], 0
        for match in found:
            if _glued(text, match.start, match.end):  # part of an id such as DC4471902
                continue
            pieces += [text[last : match.start], "[PHONE]"]
            last = match.end
            counts["PHONE"] += 1
        return "".join(pieces) + text[last:] if pieces else text


def _glued(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] touches a letter or digit on either side."""
    return (start > 0 and text[start - 1].isalnum()) or (end < len(text) and text[end].isalnum())


def _replace(match: re.Match[str], kind: str) -> str:
    """The match with its `secret` group (the whole match if it has none) as `[KIND]`."""
    if "secret" not in match.re.groupindex:
        return f"[{kind}]"
    start, end = match.span("secret")
    whole = match.group()
    return whole[: start - match.start()] + f"[{kind}]" + whole[end - match.start() :]


def nonzero(counts: Counter) -> dict[str, int]:
    """The kinds actually found, sorted."""
    return {kind: n for kind, n in sorted(counts.items()) if n}
