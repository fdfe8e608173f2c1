"""Scrubbing: secrets and personal data in trace text replaced by typed placeholders.

Runs on every trace before it is stored for generation, so nothing downstream (prompts, tasks,
exports) ever sees the original. What is found is replaced by `[KIND]` (e.g. `[EMAIL]`,
`[API_KEY]`) and counted per kind. Order matters: whole secrets (private-key blocks, auth
headers, provider keys) go first, so a phone or card pattern never cuts one in half; checksummed
numbers (cards: Luhn, IBANs: mod 97) go before phone numbers, which libphonenumber
(`phonenumbers`) finds: it knows every country's numbering plan far better than a regular
expression would. To keep ids, amounts and timestamps intact, a phone number counts only when
it is written like one (a `+` or `(`, two separators, or a word such as "phone" or "call" just
before it) and is not part of a longer token (`ORD-4471902`, `98765.43`). A placeholder matches
no pattern, so scrubbing twice changes nothing. Numbers inside JSON values (tool arguments) are
scrubbed through their text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import phonenumbers

_KEY_NAME = (
    r"(?:password|passwd|pwd|passphrase|secret|token|api[_-]?key|access[_-]?key|private[_-]?key"
    r"|credentials?)"
)
# (kind, pattern), applied in this order; a named group `secret` limits the replacement
SECRET_PATTERNS: tuple[tuple[str, str], ...] = (
    (
        "PRIVATE_KEY",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?"
        r"(?:-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----|\Z)",  # a block cut off runs to the end
    ),
    ("BEARER_TOKEN", r"(?i)\bbearer\s+[A-Za-z0-9\-._~+/]{16,}=*"),
    (
        "AUTH_HEADER",
        r"(?i)\bauthorization\b[\"']?\s*[:=]\s*[\"']?(?:basic|token|digest|apikey)\s+"
        r"(?P<secret>[^\s\"',;]{8,})",
    ),
    ("JWT", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"),
    ("AWS_ACCESS_KEY", r"\b(?:AKIA|ASIA|AGPA|AIDA|AROA|ANPA)[A-Z0-9]{16}\b"),
    (
        "AWS_SECRET_KEY",
        r"(?i)\baws_?secret_?(?:access_?)?key[\"']?\s*[:=]\s*[\"']?(?P<secret>[A-Za-z0-9/+=]{40})\b",
    ),
    ("WEBHOOK_URL", r"https://hooks\.slack\.com/services/[A-Za-z0-9/]+"),
    (
        "API_KEY",
        r"\b(?:sk-(?:ant-|proj-|svcacct-)?[A-Za-z0-9_-]{20,}"  # OpenAI, Anthropic
        r"|gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{40,}"  # GitHub
        r"|xox[abprs]-[A-Za-z0-9-]{10,}"  # Slack
        r"|(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{16,}|whsec_[A-Za-z0-9]{24,}"  # Stripe
        r"|AIza[A-Za-z0-9_-]{35}|ya29\.[A-Za-z0-9_-]{20,}"  # Google
        r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
        r"|glpat-[A-Za-z0-9_-]{20,}"  # GitLab
        r"|SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}"  # SendGrid
        r"|gsk_[A-Za-z0-9]{30,}|xai-[A-Za-z0-9]{30,}|r8_[A-Za-z0-9]{30,}"  # Groq, xAI, Replicate
        r"|npm_[A-Za-z0-9]{30,})",  # npm
    ),
    # a match starts where a run of address characters starts (never inside one), so a long
    # run with no `@` is read once, not once per character: linear in the text's length
    ("EMAIL", r"(?<![\w.%+-])[\w.%+-]+(?:@|%40)[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}\b"),
    (
        "SECRET",
        # DB_PASSWORD=..., client_secret: ..., "password is ...": the value after the name,
        # when it has a digit or a symbol ("password: change it now" is advice, not a secret)
        # (from the start of a word, with at most 64 characters around the name: linear in the
        # text's length, as EMAIL)
        rf"(?i)(?<!\w)(?:\w{{0,64}}_)?{_KEY_NAME}(?:_\w{{0,64}})?\b[\"']?"
        r"(?:\s*[:=]\s*|\s+is\s+)"
        r"[\"']?(?P<secret>(?=[^\s\"',;\[]*[\d!@#$%^&*_+=/\\-])[^\s\"',;\[]{6,})",
    ),
    ("SSN", r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b"),
)
CARD_CANDIDATE = re.compile(r"(?<![\w-])[3-6](?:[ -]?\d){12,18}(?![\w-])")
IBAN_CANDIDATE = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
PHONE_WORDS = re.compile(
    r"(?i)(?:phone|tel|telephone|mobile|cell|call|ring|text|sms|whatsapp|fax|number)\b\W{0,4}$"
)
SEVEN_DIGITS = re.compile(r"\d(?:\D{0,3}\d){6}")
SEPARATOR_GROUPS = re.compile(r"\d[\s.\-/]+\d")


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


def iban_valid(text: str) -> bool:
    """The ISO 13616 check: the rearranged IBAN, letters as numbers, is 1 modulo 97."""
    compact = text.replace(" ", "")
    if not 15 <= len(compact) <= 34:
        return False
    digits = "".join(str(int(c, 36)) for c in compact[4:] + compact[:4])
    return int(digits) % 97 == 1


@dataclass
class Scrubber:
    """Replaces secrets and personal data by `[KIND]` placeholders; `custom` adds configured
    patterns (kind -> regular expression), applied after the built-in secrets. A pattern with
    a named group `secret` has only that group replaced (`password: hunter22` ->
    `password: [SECRET]`). Phone numbers without a country code are read as in each of
    `phone_regions` in turn."""

    custom: Mapping[str, str] = field(default_factory=dict)
    phone_regions: Sequence[str] = ("US",)

    def __post_init__(self) -> None:
        kinds = [*SECRET_PATTERNS, *((k.upper(), p) for k, p in self.custom.items())]
        self._patterns = [(kind, re.compile(pattern)) for kind, pattern in kinds]

    def scrub(self, text: str, counts: Counter | None = None) -> str:
        """`text` with every finding replaced; findings are added to `counts` by kind."""
        counts = Counter() if counts is None else counts
        for kind, pattern in self._patterns:
            text, found = pattern.subn(lambda m, kind=kind: _replace(m, kind), text)
            counts[kind] += found
        text = CARD_CANDIDATE.sub(lambda m: _checked(m, counts, "CARD", _card), text)
        text = IBAN_CANDIDATE.sub(lambda m: _checked(m, counts, "IBAN", iban_valid), text)
        for region in self.phone_regions:
            text = self._phones(text, region, counts)
        return text

    def scrub_value(self, value: Any, counts: Counter) -> Any:
        """Every string inside a JSON-like value scrubbed, structure kept: dict keys too
        (unless two keys would become one), and numbers through their text (a number that
        holds a finding becomes its placeholder). A scalar under a key is read with its key
        (`phone: 4155550132`), so the key gives the context a bare number lacks."""
        if isinstance(value, str):
            return self.scrub(value, counts)
        if isinstance(value, bool) or value is None:
            return value
        if isinstance(value, int | float):
            text = str(value)
            scrubbed = self.scrub(text, counts)
            return value if scrubbed == text else scrubbed
        if isinstance(value, list | tuple):
            return [self.scrub_value(v, counts) for v in value]
        if isinstance(value, dict):
            result: dict[str, Any] = {}
            for key, item in value.items():
                name = self.scrub(str(key), counts)
                while name in result:
                    name += "'"
                result[name] = self._keyed(name, item, counts)
            return result
        return value

    def _keyed(self, key: str, value: Any, counts: Counter) -> Any:
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            return self.scrub_value(value, counts)
        prefix, found = f"{key}: ", Counter()
        scrubbed = self.scrub(prefix + str(value), found)
        if not scrubbed.startswith(prefix):  # the key ran into the value: scrub it alone
            return self.scrub_value(value, counts)
        counts.update(found)
        rest = scrubbed[len(prefix) :]
        return value if rest == str(value) else rest

    def _phones(self, text: str, region: str, counts: Counter) -> str:
        if not SEVEN_DIGITS.search(text):  # no phone number is shorter
            return text
        found = phonenumbers.PhoneNumberMatcher(text, region, leniency=phonenumbers.Leniency.VALID)
        pieces, last = [], 0
        for match in found:
            if not _written_as_phone(text, match.start, match.end):
                continue
            pieces += [text[last : match.start], "[PHONE]"]
            last = match.end
            counts["PHONE"] += 1
        return "".join(pieces) + text[last:] if pieces else text


def _card(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


def _checked(match: re.Match[str], counts: Counter, kind: str, valid: Any) -> str:
    if not valid(match.group()):
        return match.group()
    counts[kind] += 1
    return f"[{kind}]"


def _written_as_phone(text: str, start: int, end: int) -> bool:
    """Whether text[start:end] stands alone and is written the way phone numbers are."""
    before = text[start - 1] if start else " "
    after = text[end : end + 2]
    if (before.isascii() and before.isalnum()) or before in "-#/_.":
        return False  # part of an id: ORD-4471902, DC4471902, #4471902
    if after[:1].isascii() and after[:1].isalnum() or re.match(r"[.,]\d", after):
        return False  # part of a longer token or an amount: 4471902.50
    raw = text[start:end]
    if raw[:1] in "+(" or len(SEPARATOR_GROUPS.findall(raw)) >= 2:
        return True
    return PHONE_WORDS.search(text[max(0, start - 30) : start]) is not None


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
