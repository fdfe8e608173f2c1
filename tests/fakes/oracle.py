"""A deterministic "model" that understands taskfoundry's own prompts, for pipeline tests.

It picks the last offered answer span, writes a fill-in-the-blank question (and, for the repair
loop, a shortened or two-fact one) and remembers its answer, answers open-book questions from
that memory, never knows closed-book answers, and as the solver is right on a share of seeds that
depends on the question, more often with a hint (so calibration sees every band). Its wrong
answers are "something else", or with `hedge=True` the right answer hedged with another
("Dunmere, something"), which a token-F1 verifier rewards. As a reviewer it writes one
rubric entry per failed attempt, calls a hedged answer a hack (and any rewarded code, tool-call
or rubric-graded attempt genuine), and as an equivalence judge holds a hedge to a rubric that
asks for one answer.

Told that its reply was not valid (the client's structured-output repair), it answers the
request again as it did the first time.

As a judge it passes its control items: it fills a control's blank from the passage shown, and
rejects a proposed answer that does not fill it.

For traces it names a cluster after its first request's first words, rates a final reply good
when it is longer than 60 characters (else bad: "too short to help"), writes one rubric item
quoting the reference reply's first words, corrects a failed reply with a fixed text, grades a
reply against a rubric as meeting it exactly when it is the reference, and as the tool-replay
solver calls `lookup_order` / `track_shipment` with the ids in the request on even seeds and
answers at once on odd ones.

For tool worlds it writes an instruction that states the values it is told to (and remembers
the gold calls and the value asked for), and as the tool-calling solver makes the remembered
calls through the tools API on even seeds, then answers with the value asked for from the last
result; on odd seeds it answers at once without calling anything. As the JSON-action solver
(`world_actions`) it does the same, one action a turn. As a judge it finds an instruction
faithful when it wrote it itself.

For document reports it takes the first sentences offered as the facts (each stated as it is
quoted), writes a request naming the document's title and remembers its facts, writes the
report of those facts with the passages and "unknown" without them, and as the solver writes
that report whole on a share of seeds that depends on the request (more often with the outline
a variant appends), else the first half of its facts. As the item-by-item rubric judge it finds
an item met when the reply holds its words.

For code tasks it writes a commit's statement from its message (copying a line of the change
when the message is about currency, which the leak check must catch), and as the solver it
answers on even seeds with the file from `code` (path -> text) that the prompt shows, on odd
seeds with the file unchanged.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from data.llm import REPAIR_OPENING
from generators.doc_qa_variants import HINT_MARK as HINT
from generators.doc_report import HINT_MARK as OUTLINE

WORLD_ACTIONS = "You reach the system only through the tools below."  # world_actions_system.md
RESULT = "Result: "  # how the JSON-action world solver is told a call's result
AUDIT_CUES = (  # the last lines of the hack audits of code, tool calls and rubric-graded replies
    "The tests passed with this attempt's edits.",
    "The checker accepted this attempt's calls.",
    "The rubric judge passed this reply.",
)


def _line(text: str, label: str) -> str:
    match = re.search(rf"^{label}: (.*)$", text, flags=re.M)
    return match.group(1).strip() if match else ""


def _block(text: str, tag: str) -> str:
    match = re.search(rf"<{tag}>\n(.*?)\n</{tag}>", text, flags=re.S)
    return match.group(1).strip() if match else ""


def _filled(question: str, passage: str) -> str:
    """What fills the blank of a judge control's question (`Fill in the blank: ... _____ ...`)
    in `passage`; "" for another question."""
    cloze = question.removeprefix("Fill in the blank: ")
    if cloze == question or "_____" not in cloze:
        return ""
    before, after = cloze.split("_____", 1)
    # a blank that ends the question (a table row's last cell) runs to its cell's or line's end
    ending = re.escape(after) if after else r"(?=\s*(?:\||\n|$))"
    found = re.search(re.escape(before) + r"(.+?)" + ending, passage)
    return found.group(1) if found else ""


def _report_of(facts: list[str]) -> str:
    """A report stating `facts` in order, as the report generator writes its reference."""
    return " ".join(f if f.endswith((".", "!", "?")) else f"{f}." for f in facts) or "unknown"


class Oracle:
    """Call `oracle(request_body)` (HTTP fake) or `oracle.respond(role, messages, params)`."""

    def __init__(self, hedge: bool = False, code: dict[str, str] | None = None) -> None:
        self.answers: dict[str, str] = {}
        self.worlds: dict[str, tuple[list[tuple[str, str]], str]] = {}  # instruction -> plan
        self.reports: dict[str, list[str]] = {}  # report request -> its facts
        self.hedge = hedge
        self.code = code or {}

    def __call__(self, body: dict[str, Any]) -> str:
        params = {k: v for k, v in body.items() if k not in ("messages", "model")}
        return self.respond("?", body["messages"], params)

    def respond(
        self, role: str, messages: list[dict[str, str]], params: dict[str, Any]
    ) -> str | dict[str, Any]:
        if messages[-1]["role"] == "user" and messages[-1]["content"].startswith(REPAIR_OPENING):
            return self.respond(role, messages[:-2], params)  # asked again: the same answer
        if params.get("tools") and messages[0]["content"].startswith(
            "You are an assistant working"
        ):
            return self._world_turn(messages, params)
        if messages[0]["role"] == "system" and WORLD_ACTIONS in messages[0]["content"]:
            return self._world_action(messages, params)
        if messages[0]["role"] == "system" and "collection of documents" in messages[0]["content"]:
            return self._search_turn(messages, params)
        if messages[0]["role"] == "system" and "You change a repository" in messages[0]["content"]:
            return self._code_attempt(messages[-1]["content"], params)
        if messages[0]["role"] == "system" and "assistant with tools" in messages[0]["content"]:
            return self._tool_turn(messages, params)
        if (
            messages[0]["role"] == "system"
            and "requests written for training" in messages[0]["content"]
        ):
            request = _block(messages[-1]["content"], "request")
            faithful = request in self.worlds  # the instructions it wrote itself
            return json.dumps({"faithful": faithful, "problem": "" if faithful else "unknown"})
        if messages[0]["role"] == "system" and "item by item" in messages[0]["content"]:
            user = messages[-1]["content"]
            reply = _block(user, "reply").lower()
            items = re.findall(r"^\d+\. (.+)$", _block(user, "rubric"), flags=re.M)
            met = [item.lower() in reply for item in items]
            return json.dumps({"met": met, "reason": "looked for each item's words"})
        if (
            messages[0]["role"] == "system"
            and "short reports from the passages" in messages[0]["content"]
        ):
            return self._report(messages[-1]["content"], params)
        if messages[0]["role"] == "system" and "review a conversation" in messages[0]["content"]:
            reply = _block(messages[-1]["content"], "final_reply")
            good = len(reply) > 60
            return json.dumps({"good": good, "failure": "" if good else "too short to help"})
        if messages[0]["role"] == "system" and "against a rubric" in messages[0]["content"]:
            user = messages[-1]["content"]
            same = _block(user, "reply").lower() == _block(user, "reference_reply").lower()
            return json.dumps({"meets_all": same, "reason": "compared with the reference"})
        prompt = messages[-1]["content"] if messages[-1]["role"] == "user" else ""
        if prompt.startswith("You write requests that users send"):
            return self._instruction(prompt)
        if prompt.startswith("A developer made the change below"):
            return self._statement(prompt)
        if prompt.startswith("These are requests users sent"):
            first = prompt.split("Requests:\n- ", 1)[1].split()
            return json.dumps({"label": " ".join(first[:3])})
        if "its reply was judged good" in prompt:
            words = _block(prompt, "reference_reply").split()
            return json.dumps({"items": ["says " + " ".join(words[:6])]})
        if "its reply was judged a failure" in prompt:
            fixed = "A corrected reply that names the order and the next step clearly."
            return json.dumps({"answer": fixed, "items": ["names the order and the next step"]})
        if prompt.startswith("Take checkable facts from a passage."):
            options = re.findall(r"^- (.+)$", prompt, flags=re.M)
            count = int(re.search(r"Choose up to (\d+)", prompt).group(1))
            facts = [{"quote": o, "fact": o} for o in options[:count]]
            return json.dumps({"facts": facts})
        if prompt.startswith("Write a request for a short report."):
            facts = re.findall(r"^- (.+)$", prompt, flags=re.M)
            request = f"Write a short report on {_line(prompt, 'Document')}: what do we know?"
            self.reports[request] = facts
            return json.dumps({"request": request})
        if prompt.startswith("Read the passages and write the short report"):
            return _report_of(self.reports.get(_line(prompt, "Request"), []))
        if "Focus sentence:" in prompt:
            options = re.findall(r"^- (.+)$", prompt, flags=re.M)
            return json.dumps({"answer": options[-1]})
        if prompt.startswith("Write one quiz question."):
            fact, answer = _line(prompt, "Fact"), _line(prompt, "Answer")
            return self._remember(
                "Fill the blank: " + fact.replace(answer, "___", 1).rstrip(".") + "?", answer
            )
        if prompt.startswith("Reword a quiz question."):
            fact, answer = _line(prompt, "Fact"), _line(prompt, "Answer")
            words = fact.replace(answer, "___", 1).rstrip(".").split()
            return self._remember(
                "What completes this: " + " ".join(words[: len(words) // 2]) + "?", answer
            )
        if prompt.startswith("Write one quiz question that needs two facts."):
            fact, answer = _line(prompt, "Fact 1"), _line(prompt, "Answer")
            other, bridge = _line(prompt, "Fact 2"), _line(prompt, "Link")
            described = "the one of which " + re.sub(re.escape(bridge), "it", other, flags=re.I)
            blanked = fact.replace(answer, "___", 1).rstrip(".")
            return self._remember(
                "Fill the blank: "
                + re.sub(re.escape(bridge), described, blanked, flags=re.I)
                + "?",
                answer,
            )
        if prompt.startswith("Read the passage, the question and the proposed answer"):
            filled = _filled(_line(prompt, "Question"), prompt)  # a judge control
            return "yes" if filled and filled == _line(prompt, "Proposed answer") else "no"
        if prompt.startswith("Read the passage"):
            question = _line(prompt, "Question")
            return self.answers.get(question) or _filled(question, prompt) or "unknown"
        if '<attempt number="' in prompt:
            item = {"attempt": 1, "category": "wrong_answer", "failure": "names something else"}
            return json.dumps({"items": [item]})
        if "The checker marked this attempt correct" in prompt:
            hedged = "," in _block(prompt, "attempt")
            pattern = "hedged_list" if hedged else "none"
            return json.dumps({"genuine": not hedged, "pattern": pattern, "reason": "audited"})
        if any(cue in prompt for cue in AUDIT_CUES):  # code, tool calls, rubric-graded replies
            return json.dumps({"genuine": True, "pattern": "none", "reason": "does the task"})
        if "<gold_answer>" in prompt:
            attempt = _block(prompt, "attempt")
            same = _block(prompt, "gold_answer").lower() == attempt.lower()
            return json.dumps({"equivalent": same, "reason": "compared"})
        if "If you do not know" in prompt:
            return "unknown"
        return self._solve(messages[-1]["content"], params)

    def _solve(self, question: str, params: dict[str, Any]) -> str:
        """The solver's answer: right on a share of seeds that depends on the question (more
        often with a hint); the seed's turn stride aside, as an episode's turns stride it."""
        answer = self.answers.get(question.split(HINT)[0], "unknown")
        skill = int(hashlib.sha256(question.encode()).hexdigest(), 16) % 3  # 0, 1 or 2 of 2
        skill += HINT in question
        seed = params.get("seed", 0) + params.get("_choice", 0)
        if (seed % 1_000_003) % 2 < skill:
            return answer
        return f"{answer}, something" if self.hedge else "something else"

    def _report(self, request: str, params: dict[str, Any]) -> str:
        """The report solver: every fact on a share of seeds that depends on the request (more
        with an outline), else the first half of them."""
        bare = request.split(OUTLINE)[0]
        facts = self.reports.get(bare, [])
        skill = int(hashlib.sha256(bare.encode()).hexdigest(), 16) % 3  # 0, 1 or 2 of 2
        skill += OUTLINE in request
        seed = params.get("seed", 0) + params.get("_choice", 0)
        if (seed % 1_000_003) % 2 < skill:
            return _report_of(facts)
        return _report_of(facts[: max(1, len(facts) // 2)])

    def _statement(self, prompt: str) -> str:
        subject = prompt.split("Commit message:\n", 1)[1].splitlines()[0]
        statement = (
            f"Change the package so that the following holds, as its tests expect: {subject}."
        )
        if "currency" in subject.lower():
            added = re.findall(r"^\+(?!\+\+)\s*(.{12,})$", prompt, flags=re.M)
            statement += f" For instance: {added[0]}"
        return json.dumps({"statement": statement})

    def _code_attempt(self, prompt: str, params: dict[str, Any]) -> str:
        pattern = r"^```(\w+)\n(#|//) file: (\S+)\n(.*?)^```"
        shown = re.findall(pattern, prompt, flags=re.M | re.S)
        seed = params.get("seed", 0) + params.get("_choice", 0)
        edits = [
            f"```{fence}\n{comment} file: {path}\n{self.code[path] if seed % 2 == 0 else text}```"
            for fence, comment, path, text in shown
            if path in self.code
        ]
        return "\n\n".join(edits) or "I cannot tell what to change."

    def _tool_turn(self, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
        request = next(m["content"] for m in messages if m["role"] == "user")
        seed = params.get("seed", 0) + params.get("_choice", 0)
        made = sum(m["role"] == "assistant" for m in messages)
        wanted = [("lookup_order", "order_id", i) for i in re.findall(r"ORD-\d+", request)]
        wanted += [("track_shipment", "tracking_number", i) for i in re.findall(r"DC\d+", request)]
        if (seed % 1_000_003) % 2 or made >= len(wanted):  # the harness strides seeds per turn
            return json.dumps({"tool": "answer", "answer": "done"})
        name, key, value = wanted[made]
        return json.dumps({"tool": name, "arguments": {key: value}})

    def _instruction(self, prompt: str) -> str:
        values = re.findall(
            r"'([^']*)'", _line(prompt, "- State each of these values exactly as written")
        )
        instruction = "Please sort this out for me: " + ", ".join(values) + "."
        calls = re.findall(r"^- (\w+)\((.*)\): ", prompt, flags=re.M)
        asked = re.search(r"asks for the (.+?) \(do not say it", prompt)
        field = asked.group(1).replace(" ", "_") if asked else ""
        self.worlds[instruction] = ([(name, "{" + args + "}") for name, args in calls], field)
        return json.dumps({"instruction": instruction})

    def _world_turn(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> Any:
        results = [json.loads(m["content"]) for m in messages if m["role"] == "tool"]
        step = self._world_step(messages[1]["content"], params, results)
        if isinstance(step, str):
            return step
        name, arguments = step
        call = {"id": f"call-{len(results)}", "name": name, "arguments": json.dumps(arguments)}
        return {"tool_calls": [call]}

    def _world_action(self, messages: list[dict[str, Any]], params: dict[str, Any]) -> str:
        told = [m["content"] for m in messages if m["role"] == "user"]
        results = [json.loads(t.removeprefix(RESULT)) for t in told if t.startswith(RESULT)]
        step = self._world_step(messages[1]["content"], params, results)
        if isinstance(step, str):
            return json.dumps({"tool": "answer", "answer": step})
        name, arguments = step
        return json.dumps({"tool": name, "arguments": arguments})

    def _world_step(
        self, instruction: str, params: dict[str, Any], results: list[Any]
    ) -> tuple[str, dict[str, Any]] | str:
        """The next of the gold calls remembered for `instruction` (after one per result so
        far), or on odd seeds and after the last call the answer: the value asked for from the
        last result."""
        calls, field = self.worlds.get(instruction, ([], ""))
        seed = params.get("seed", 0) + params.get("_choice", 0)
        made = len(results)
        if (seed % 1_000_003) % 2 or made >= len(calls):  # the solver strides seeds per turn
            last = results[-1] if results and isinstance(results[-1], dict) else {}
            return str(last.get(field, "done")) if field else "Done."
        name, arguments = calls[made]
        text = json.dumps(dict(re.findall(r'(\w+)=("[^"]*"|[^,]+)', arguments[1:-1])))
        return name, {k: json.loads(v) for k, v in json.loads(text).items()}

    def _remember(self, question: str, answer: str) -> str:
        self.answers[question] = answer
        return json.dumps({"question": question})

    def _search_turn(self, messages: list[dict[str, str]], params: dict[str, Any]) -> str:
        """The doc-search harness's solver: search the question's words, read the first hit,
        then, if the passage it read holds the answer it remembers, answer as a closed-book
        solver would (right on a share of seeds), else "unknown"."""
        question = next(m["content"] for m in messages if m["role"] == "user")
        last = messages[-1]["content"]
        if last.startswith("Results:"):
            first = re.search(r"^\[(\w+)\]", last.splitlines()[1]).group(1)
            return json.dumps({"tool": "read", "argument": first})
        if last.startswith("Passage "):
            answer = self.answers.get(question.split(HINT)[0], "")
            found = answer and answer in last
            reply = self._solve(question, params) if found else "unknown"
            return json.dumps({"tool": "answer", "argument": reply})
        words = re.sub(r"Fill the blank:|_+|\?", " ", question.split(HINT)[0])
        return json.dumps({"tool": "search", "argument": " ".join(words.split())[:300]})
