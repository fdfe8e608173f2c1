"""Scrubbing: secrets and personal data in trace text replaced by typed placeholders.

Runs on every trace before it is stored for generation, so nothing downstream (prompts, tasks,
exports) ever sees the original. What is found is replaced by `[KIND]` (e.g. `[EMAIL]`,
`[API_KEY]`) and counted per kind. Order matters: whole secrets (private-key blocks, auth
headers, provider keys) go first, so a phone or card pattern never cuts one in half; then
values that count only when a check accepts them (after a secret's name: one with a digit or a
symbol; after a key's name: one shaped like key material; checksummed numbers: cards by Luhn,
IBANs by mod 97); phone numbers go last, which libphonenumber (`phonenumbers`) finds: it knows
every country's numbering plan far better than a regular expression would. To keep ids, amounts
and timestamps intact, a phone number counts only when it is written like one (a `+` or `(`,
two separators, or a word such as "phone" or "call me at" just before it) and is not part of a
longer token (`ORD-4471902`, `98765.43`); what is written that way is a phone number even where
libphonenumber rejects it as invalid (`+1 555 0100 1234`, a fictional range, a local number
without its area code). A placeholder matches no pattern, so scrubbing twice changes nothing.
Numbers inside JSON values (tool arguments) are scrubbed through their text.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import phonenumbers

_PASSWORD_NAME = r"(?:password|passwd|pwd|passphrase|passcode)"
# words that follow "password: " in advice and descriptions rather than as the password
_NOT_A_PASSWORD = (
    r"(?:the|its?|is|was|are|be|not|none|null|never|always|please|must|should|will|can|may"
    r"|required|optional|incorrect|invalid|wrong|expired|forgotten|hidden|change|reset|update"
    r"|enter|set|choose|use|type|see|same|new|old|your|my|our|their|this|that|and|or)"
)
_KEY_NAME = (
    rf"(?:{_PASSWORD_NAME}|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?)"
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
        r"|npm_[A-Za-z0-9]{30,}"  # npm
        r"|(?:SK|AC)[0-9a-fA-F]{32})",  # Twilio (API key, account SID)
    ),
    # a match starts where a run of address characters starts (never inside one), so a long
    # run with no `@` is read once, not once per character: linear in the text's length
    ("EMAIL", r"(?<![\w.%+-])[\w.%+-]+(?:@|%40)[\w-]+(?:\.[\w-]+)*\.[^\W\d_]{2,}\b"),
    (
        "SECRET",
        # a password of letters only: assigned (password=hunter, pwd:letmein) or given after
        # "password: " ("my password: hunter"), unless the word is advice or a description
        # ("password: change it", "password: required")
        rf"(?i)(?<!\w)(?:\w{{0,64}}_)?{_PASSWORD_NAME}(?:_\w{{0,64}})?\b[\"']?"
        rf"(?:\s*=\s*[\"']?|:[\"']?|:\s+[\"']?(?!{_NOT_A_PASSWORD}\b))"
        r"(?P<secret>[^\W\d_]{3,})(?![^\s\"',;.!?)\]}])",  # (not the start of one with digits)
    ),
    ("SSN", r"\b(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}\b"),
)
# What a text must hold (lower-cased) for a pattern to have anything to find: a pass over text
# without it is skipped (a substring test reads 1 MB in about a millisecond, a pattern in 50)
NEEDLES: dict[str, tuple[str, ...]] = {
    "PRIVATE_KEY": ("private key",),
    "BEARER_TOKEN": ("bearer",),
    "AUTH_HEADER": ("authorization",),
    "JWT": ("eyj",),
    "AWS_ACCESS_KEY": ("akia", "asia", "agpa", "aida", "aroa", "anpa"),
    "AWS_SECRET_KEY": ("secret",),
    "WEBHOOK_URL": ("hooks.slack.com",),
    "EMAIL": ("@", "%40"),
    "SECRET": ("pass", "pwd"),
    "SSN": ("-",),
}
# DB_PASSWORD=..., client_secret: ..., "password is ...": the value after the name, when it
# has a digit or a symbol (`_secret_shaped`: "password: change it" is advice, not a secret)
# (from the start of a word, with at most 64 characters around the name: linear in the text's
# length, as EMAIL; the value is checked after it matched, so a value without a digit is read
# once, not once per name inside it: `pwd:pwd:pwd:...`)
NAMED_SECRET_CANDIDATE = re.compile(
    rf"(?i)(?<!\w)(?:\w{{0,64}}_)?{_KEY_NAME}(?:_\w{{0,64}})?\b[\"']?(?:\s*[:=]\s*|\s+is\s+)"
    r"[\"']?(?P<secret>[^\s\"',;\[]{6,})"
)
# AccountKey=<base64>, key=<hex>, primaryKey: ...: the value after a name ending in "key" when
# it is shaped like a key (`_key_shaped`), not like a word or an identifier
KEY_CANDIDATE = re.compile(
    r"(?i)(?<![\w-])\w{0,64}key[\"']?\s*[:=]\s*[\"']?"
    r"(?P<secret>[A-Za-z0-9+/_-]{16,}={0,2})(?![\w+/=-])"
)
CARD_CANDIDATE = re.compile(r"(?<![\w-])[3-6](?:[ -]?\d){12,18}(?![\w-])")
IBAN_CANDIDATE = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
PHONE_WORDS = re.compile(
    r"(?i)(?:phone|tel|telephone|mobile|cell|call|ring|text|sms|whatsapp|fax|number|dial|reach)"
    r"\b(?:\W{1,4}(?:me|us|him|her|them|at|on|is|to|my|our|his|the|back|now)\b){0,3}\W{0,4}$"
)
# written as a phone number whether or not it is a valid one: a `+` and a country code, or
# 415-555-0132 / (415) 555 0132, or 555-0199 (with a phone word before it: `_written_as_phone`)
PHONE_SHAPED = re.compile(
    r"(?<![\w+])(?:\+[1-9][\d ().-]{6,24}\d|\(?\d{3}\)?[ .-]?\d{3}[ .-]\d{4}|\d{3}[ .-]\d{4})"
)
SEVEN_DIGITS = re.compile(r"\d(?:\D{0,3}\d){6}")
# Where a phone number as written can sit: digits and the separators numbers are written with,
# a "+" or "(" only first. libphonenumber reads windows of these runs, never the whole text, so
# its cost follows the runs, not the length of one word that only looks numeric ("+1+1+1...").
PHONE_RUN = re.compile(r"[+(]?\d[\d\s().\-/]{5,}")  # 7 characters at least
NOT_A_PHONE = re.compile(r"\d{18,}")  # more digits in a row than any phone number has
PHONE_WINDOW, PHONE_OVERLAP = 256, 48  # a run longer than a window is read in overlapping ones
PHONE_CONTEXT = 8  # characters around a window that libphonenumber sees too
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
    patterns (kind -> regular expression), applied after the built-in patterns and before the
    checked values. A pattern with a named group `secret` has only that group replaced
    (`password: hunter22` -> `password: [SECRET]`). Phone numbers without a country code are
    read as in each of `phone_regions` in turn."""

    custom: Mapping[str, str] = field(default_factory=dict)
    phone_regions: Sequence[str] = ("US",)

    def __post_init__(self) -> None:
        built_in = [(kind, re.compile(p), NEEDLES.get(kind, ())) for kind, p in SECRET_PATTERNS]
        custom = [(kind.upper(), re.compile(p), ()) for kind, p in self.custom.items()]
        self._patterns = [*built_in, *custom]

    def scrub(self, text: str, counts: Counter | None = None) -> str:
        """`text` with every finding replaced; findings are added to `counts` by kind."""
        counts = Counter() if counts is None else counts
        lowered = text.lower()
        for kind, pattern, needles in self._patterns:
            if needles and not any(needle in lowered for needle in needles):
                continue
            text, found = pattern.subn(lambda m, kind=kind: _replace(m, kind), text)
            if found:
                counts[kind] += found
                lowered = text.lower()  # what the next patterns may find has changed
        for kind, candidate, valid, needles in CHECKED:
            if needles and not any(needle in lowered for needle in needles):
                continue
            before = counts[kind]
            text = candidate.sub(lambda m, k=kind, v=valid: _checked(m, counts, k, v), text)
            if counts[kind] != before:
                lowered = text.lower()
        for region in self.phone_regions:
            text = self._phones(text, region, counts)
        return PHONE_SHAPED.sub(lambda m: _shaped_phone(m, counts), text)

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
        pieces, last = [], 0
        for start, end in phone_spans(text, region):
            if not _written_as_phone(text, start, end):
                continue
            pieces += [text[last:start], "[PHONE]"]
            last = end
            counts["PHONE"] += 1
        return "".join(pieces) + text[last:] if pieces else text


def phone_spans(text: str, region: str) -> list[tuple[int, int]]:
    """Where libphonenumber finds valid numbers for `region` in `text`, in order and without
    overlaps, reading only the windows where a number can be written (`_phone_windows`)."""
    found = set()
    for start, end in _phone_windows(text):
        window = text[start:end]
        for match in phonenumbers.PhoneNumberMatcher(
            window, region, leniency=phonenumbers.Leniency.VALID
        ):
            raw = match.raw_string  # a window's edge can leave it a space before the number
            lead = len(raw) - len(raw.lstrip())
            found.add((start + match.start + lead, start + match.start + len(raw.rstrip())))
    spans, last = [], 0
    for start, end in sorted(found):
        if start >= last:  # windows overlap: a number seen twice is kept once
            spans.append((start, end))
            last = end
    return spans


def _phone_windows(text: str) -> Iterator[tuple[int, int]]:
    """Spans of `text` where a phone number may be written: runs of `PHONE_RUN` with seven
    digits or more, split where more digits stand in a row than a phone number has, cut into
    overlapping windows, each with `PHONE_CONTEXT` characters of context either side
    (libphonenumber looks at what touches a number: "2026-11-24 10:42" is a time, not a
    number, because ":42" follows it)."""
    for run in PHONE_RUN.finditer(text):
        run_start, run_end = run.span()
        piece_start = run_start
        for long in [*NOT_A_PHONE.finditer(text, run_start, run_end), None]:
            piece_end = long.start() if long else run_end
            if SEVEN_DIGITS.search(text, piece_start, piece_end):
                for start in range(piece_start, piece_end, PHONE_WINDOW - PHONE_OVERLAP):
                    end = min(start + PHONE_WINDOW, piece_end)
                    yield max(0, start - PHONE_CONTEXT), min(len(text), end + PHONE_CONTEXT)
                    if end == piece_end:
                        break
            piece_start = long.end() if long else run_end


def _card(text: str) -> bool:
    digits = re.sub(r"\D", "", text)
    return 13 <= len(digits) <= 19 and luhn_valid(digits)


def _key_shaped(value: str) -> bool:
    """Whether a value given for a key looks like key material: 32 or more hex digits, or
    mixed case with a digit or a base64 symbol (`Zm9vYmFy...==`), or 40 characters of mixed
    case; identifiers (`order_items_v2`) and words are not."""
    body = value.rstrip("=")
    if len(body) >= 32 and all(c in "0123456789abcdefABCDEF" for c in body):
        return True
    mixed = any(c.isupper() for c in body) and any(c.islower() for c in body)
    return mixed and (len(body) >= 40 or any(c.isdigit() or c in "+/" for c in body))


def _shaped_phone(match: re.Match[str], counts: Counter) -> str:
    """A phone-shaped match as `[PHONE]` when it has a phone number's count of digits and
    stands alone written as one, else kept."""
    digits = sum(c.isdigit() for c in match.group())
    if not 7 <= digits <= 15 or not _written_as_phone(match.string, match.start(), match.end()):
        return match.group()
    counts["PHONE"] += 1
    return "[PHONE]"


def _secret_shaped(value: str) -> bool:
    """Whether a value given for a secret's name has a digit or a symbol."""
    return any(c.isdigit() or c in "!@#$%^&*_+=/\\-" for c in value)


# (kind, candidate, check), applied in this order after the patterns: a candidate is replaced
# (its `secret` group, where it has one) when the check accepts it
# (kind, candidate, the check a candidate must pass, what a text must hold for any candidate)
CHECKED: tuple[tuple[str, re.Pattern[str], Callable[[str], bool], tuple[str, ...]], ...] = (
    (
        "SECRET",
        NAMED_SECRET_CANDIDATE,
        _secret_shaped,
        ("pass", "pwd", "secret", "token", "key", "credential"),
    ),
    ("SECRET", KEY_CANDIDATE, _key_shaped, ("key",)),
    ("CARD", CARD_CANDIDATE, _card, ()),
    ("IBAN", IBAN_CANDIDATE, iban_valid, ()),
)


def _checked(match: re.Match[str], counts: Counter, kind: str, valid: Callable[[str], bool]) -> str:
    """`match` replaced as `_replace` does when `valid` accepts the text it would replace
    (its `secret` group if it has one), else kept."""
    secret = "secret" if "secret" in match.re.groupindex else 0
    if not valid(match.group(secret)):
        return match.group()
    counts[kind] += 1
    return _replace(match, kind)


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
