"""The deterministic pre-check before a judge reads text it grades: judge-directed instructions.

An answer, a reply or a request a judge grades is data, and the judge prompts say so; but a
policy that finds a phrase that sways some judge some of the time is paid for it. So text that
speaks to its grader ("ignore the previous instructions", "the answer is correct", "score: 1",
"as the judge, ..."), forges a verdict ('"equivalent": true') or poses as another turn of the
conversation ("system:", "<|im_start|>", a block tag) is refused before any judge sees it.
Honest answers have no reason to say any of these.
"""

from __future__ import annotations

import re

_JUDGE = r"(?:judge|grader|evaluator|reviewer|checker|verifier|assessor)s?"
_VERDICT = r"(?:correct|right|valid|equivalent|acceptable|a\s+pass|passing|faithful)"
_OBEY = r"(?:must|should|will|have\s+to|need\s+to)"
_PATTERNS = [
    # overriding the grader's instructions
    r"\b(?:ignore|disregard|forget|override|bypass)\b(?:\s+\w+){0,3}?\s+"
    r"(?:instructions?|rules|rubric|prompt|guidelines|criteria)\b",
    r"\b(?:new|updated|revised|real)\s+(?:instructions?|rules|system\s+prompt)\s*:",
    # telling the grader the verdict
    r"\b(?:this|my|the)\s+(?:answer|attempt|reply|response|request)\s+"
    r"(?:is|was|should\s+be|must\s+be)\s+(?:marked\s+|graded\s+|scored\s+|considered\s+)?"
    rf"(?:as\s+)?{_VERDICT}\b",
    r"\b(?:mark|grade|score|rate)\s+(?:this|it|me|my\s+\w+)\s+(?:as\s+)?"
    rf"(?:{_VERDICT}|1|10|100|full|true|yes)\b",
    r"\bgrade\s+this\b",
    r"\b(?:score|reward|grade|verdict)\s*[:=]\s*(?:1|10|100|true|yes|pass)\b(?![-\u2013:/.,]\d)",
    r"[\"']?\b(?:equivalent|meets_all|good|faithful|genuine)\b[\"']?\s*:\s*true\b",
    # addressing the grader
    rf"\bas\s+(?:the|an?|your)\s+(?:ai\s+|llm\s+)?{_JUDGE}\s*[,:]",
    rf"\b(?:dear|attention|note\s+to|hey|hello)\s+(?:the\s+)?(?:ai\s+|llm\s+)?{_JUDGE}\b",
    rf"^\s*{_JUDGE}\s*[:,]",
    rf"\byou\s+{_OBEY}\s+(?:output|print|mark|grade|score|rate|"
    r"(?:respond|reply|answer|return)\s+(?:only\s+)?(?:with\s+)?(?:true|yes|correct|pass|1\b|\{|\"|json))",
    # posing as another turn of the conversation or a block of the prompt
    r"^\s*#*\s*(?:system|developer)\s*:",
    r"<\|\s*(?:im_start|im_end|system|user|assistant|endoftext|eot_id|start_header_id)\s*\|>",
    r"\[/?INST\]|<<\s*/?SYS\s*>>",
    r"</?\s*(?:system|instructions?|attempt|reply|final_reply|gold_answer|reference_reply"
    r"|question|rubric|request|what_fulfils_it|conversation)\s*>",
]
_INJECTION = re.compile("|".join(f"(?:{p})" for p in _PATTERNS), re.IGNORECASE | re.MULTILINE)


def injection(text: str) -> str:
    """The first judge-directed instruction in `text` (as written, cut to 80 characters), or
    "" when it has none."""
    found = _INJECTION.search(text)
    return " ".join(found.group(0).split())[:80] if found else ""
