"""The offline `demo` provider: simulated models on a loopback server, so moa-chat works with no key.

The models are deterministic and say plainly that they are simulated. References give short, distinct
takes derived from the prompt, each at its own pace; the aggregator streams a synthesis that visibly
draws on them, with a list and a code block, at a realistic few tens of tokens per second. Calls go
through the same `call_llm` / `openai` SDK path as a real provider.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..images import IMAGE_NAMES, facts, read_part
from ..prompts import (
    AGREEMENT_HEADER,
    GUIDANCE_HEADER,
    JUDGE_PAIRWISE_LEAD,
    JUDGE_RUBRIC_LEAD,
    LAYER_HEADER,
    TOOL_RESULT_PREFIX,
    message_text,
)
from ..text.wording import plural
from .loopback_server import OpenAICompatibleServer, Reply, ScriptedToolCall

PACE_ENV = "MOA_CHAT_DEMO_PACE"  # multiplies every simulated delay; 0 makes the demo instant

_STOPWORDS = frozenset(
    "a an and are as at be but by can could do does for from had has have how i if in into is it its me my "
    "of on or our should so that the their them then there these this to up was we what when where which "
    "who why will with would you your please tell explain give show make about just than also any some "
    "write create build get use need want help way best like know function code".split()
)


@dataclass(frozen=True)
class _Persona:
    model: str
    delay: float  # seconds before the first token
    piece_delay: float  # seconds between tokens


PERSONAS = (
    _Persona("simulated-analyst", 0.55, 0.018),
    _Persona("simulated-skeptic", 0.85, 0.022),
    _Persona("simulated-pragmatist", 1.15, 0.016),
)
AGGREGATOR = _Persona("simulated-synthesizer", 0.25, 0.028)
MODELS = [p.model for p in (*PERSONAS, AGGREGATOR)]


def _pace() -> float:
    try:
        return max(0.0, float(os.environ.get(PACE_ENV, "1")))
    except ValueError:
        return 1.0


def _digest(text: str) -> int:
    return int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)


def _keywords(prompt: str) -> list[str]:
    words = re.findall(r"[A-Za-z][A-Za-z0-9_+#.-]*", prompt)
    seen: list[str] = []
    for word in words:
        w = word.strip(".-").lower()
        if len(w) > 2 and w not in _STOPWORDS and w not in seen:
            seen.append(w)
    return seen or ["the question"]


def _quote(prompt: str, limit: int = 60) -> str:
    flat = " ".join(prompt.split())
    return flat if len(flat) <= limit else flat[: limit - 1].rstrip() + "…"


def _identifier(keywords: list[str]) -> str:
    name = "_".join(re.sub(r"[^a-z0-9]", "", k) for k in keywords[:2]).strip("_")
    return name if name and not name[0].isdigit() else "solve"


def _last_user_prompt(messages: list[dict[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            text = message_text(message.get("content"))
            if not text.startswith(GUIDANCE_HEADER) and not text.startswith(TOOL_RESULT_PREFIX):
                return text
    return ""


# A file attached to the prompt (`@path`, `ask -a`) follows the user's words between these markers.
_ATTACHED = re.compile(r'\n\n<attached-file path="(?P<path>[^"\n]*)"[^>\n]*>\n(?P<text>.*?)\n</attached-file>', re.S)


# Context an agent puts before the user's words (Claude Code's): not what the user asked.
_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>\s*|\s*<attached-image [^>\n]*/>|\n?\[image\]", re.S)


def _own_words(prompt: str) -> str:
    """The prompt without its attached files, an agent's reminders and a previous layer's answers: what the
    user typed."""
    prompt = _REMINDER.sub("", prompt.split(f"\n\n{LAYER_HEADER}", 1)[0])
    match = _ATTACHED.search(prompt)
    return prompt[: match.start()] if match else prompt


def _attachments_read(prompt: str) -> list[str]:
    """A few lines on each attached file, from its text: its title, its size and its sections."""
    lines = []
    for match in _ATTACHED.finditer(prompt):
        text = match.group("text")
        rows = text.splitlines()
        title = next((row.lstrip("# ").strip() for row in rows if row.strip()), "(empty)")
        sections = [row.lstrip("# ").strip() for row in rows if row.startswith("## ")]
        shown = ", ".join(f"*{_quote(name, 40)}*" for name in sections[:6]) + (" …" if len(sections) > 6 else "")
        lines.append(f"- **`{match.group('path')}`** ({plural(len(rows), 'line')}) opens with “{_quote(title, 100)}”")
        if sections:
            lines.append(f"  and covers {plural(len(sections), 'section')}: {shown}")
    return lines


def images_seen(messages: list[dict[str, Any]]) -> list[str]:
    """What the demo makes of the images in the user's last prompt: each one's name (as the prompt names it),
    format, size and bytes, read from the image itself (a model that cannot see reads a note, and says so)."""
    for message in reversed(messages):
        content = message.get("content")
        if message.get("role") != "user" or message_text(content).startswith(GUIDANCE_HEADER):
            continue
        names = iter(IMAGE_NAMES.findall(message_text(content)))
        seen = []
        for part in content if isinstance(content, list) else []:
            image = read_part(part)
            found = facts(image.data) if image is not None and image.data is not None else None
            if image is not None:
                what = found.describe() if found is not None else "not an image it can read"
                seen.append(f"`{next(names, 'an image')}` ({what})")
            elif isinstance(part, dict) and "not shown to this model]" in str(part.get("text", "")):
                seen.append(f"{part['text']} — this model cannot see, so it only knows the note")
        return seen
    return []


def _images_line(messages: list[dict[str, Any]]) -> str:
    seen = images_seen(messages)
    return f"**The image{'s' if len(seen) > 1 else ''}.** I see {', '.join(seen)}." if seen else ""


def reference_take(model: str, prompt: str) -> str:
    """A reference's answer. In a later layer (the previous layer's answers follow the prompt) the three
    converge on one plan, so `layers: auto` sees a first layer that disagrees and a second that agrees."""
    read_the_panel = f"\n\n{LAYER_HEADER}" in prompt
    prompt = _own_words(prompt)
    words = _keywords(prompt)
    first, second = words[0], (words[1] if len(words) > 1 else words[0])
    q = _quote(prompt)
    variant = _digest(model + prompt) % 2
    if read_the_panel:
        return (
            f"{CONVERGED_LEAD} Build the smallest version of {first} that works end to end, with a test and a "
            f"way back, then improve {second} one measured step at a time. "
            + {
                "simulated-analyst": "Say first what a good result looks like, so each step can be measured.",
                "simulated-skeptic": "Try the edge cases (empty input, failure half-way) before the next step.",
            }.get(model, "Write down what you changed and why.")
        )
    if model == "simulated-analyst":
        return (
            f"**Framing.** The heart of “{q}” is *{first}*; get that right and *{second}* follows. "
            f"Split it into three parts: what {first} must achieve, the constraints around {second}, and "
            + ("how you will know it worked." if variant else "what a good result looks like, measured.")
        )
    if model == "simulated-skeptic":
        return (
            f"**Watch out.** Answers about {first} tend to skip the edge cases: empty input, failure half-way "
            f"through, and {second} behaving differently at scale. "
            + (
                "Keep a way back — a test, a log, a rollback — before you commit."
                if variant
                else "Decide up front what should happen when it goes wrong."
            )
        )
    return (
        f"**Do this.** Build the smallest version of {first} that works end to end, prove it with one test, "
        f"then improve {second} one measured step at a time. "
        + ("Resist polishing before it runs." if variant else "Write down what you changed and why.")
    )


CONVERGED_LEAD = "**Having weighed the panel.**"


def agreement_verdict(request: str) -> str:
    """The judge of `layers: auto`: the answers agree when each is a later layer's, which converge on one
    plan; a first layer's three takes differ."""
    answers = re.split(r"^## Answer \d+\n\n", request, flags=re.M)[1:]
    agreed = len(answers) > 1 and all(answer.startswith(CONVERGED_LEAD) for answer in answers)
    return "AGREE" if agreed else "DISAGREE"


def _between(text: str, start: str, end: str) -> str:
    """The part of `text` after the first `start` and before the last `end` after it ("" when either is missing)."""
    begin = text.find(start)
    if begin < 0:
        return ""
    begin += len(start)
    stop = text.rfind(end, begin)
    return text[begin:stop] if stop >= 0 else ""


def _coverage(request: str, answer: str) -> tuple[int, int]:
    """How many of the request's key words the answer uses, of how many."""
    wanted = _keywords(request)
    used = {word.lower().strip(".-") for word in re.findall(r"[A-Za-z][A-Za-z0-9_+#.-]*", answer)}
    return sum(word in used for word in wanted), len(wanted)


def judgement(request: str) -> str:
    """`moa-chat eval --judge demo:MODEL`: a simulated judge that answers in the judge's format. An answer scores
    by how many of the request's key words it uses: pairwise, the one that uses more wins and equal ones tie
    (whichever order they come in); on a rubric, that share of 10."""
    lead = "*Simulated verdict — the offline demo judged by the request's key words each answer uses.*"
    if request.startswith(JUDGE_RUBRIC_LEAD):
        asked = _between(request, "[User request]\n", "\n\n[Rubric]\n")
        used, of = _coverage(asked, _between(request, "\n\n[Answer]\n", "\n\nExplain briefly"))
        return f"{lead} The answer uses {used} of {of}.\n\n[[{round(10 * used / max(of, 1))}]]"
    asked = _between(request, "[User request]\n", "\n\n[Answer A]\n")
    a, of = _coverage(asked, _between(request, "\n\n[Answer A]\n", "\n\n[Answer B]\n"))
    b, _ = _coverage(asked, _between(request, "\n\n[Answer B]\n", "\n\nJudge which answer"))
    verdict = "A" if a > b else "B" if b > a else "C"
    return f"{lead} A uses {a} of {of}, B uses {b}.\n\n[[{verdict}]]"


def _references_in(guidance: str) -> list[tuple[str, list[str]]]:
    """(label, sentences) of each reference answer in a guidance message."""
    found = []
    for match in re.finditer(
        r"^\[Reference \d+ — (.+?)\]\n\n(.+?)(?=\n\[Reference |\nUnavailable this turn|\n\[End of the |\Z)",
        guidance,
        re.S | re.M,
    ):
        body = re.sub(r"\*\*[^*]+\*\*\s*", "", match.group(2).strip())
        found.append((match.group(1).strip(), re.split(r"(?<=[.!?])\s", body)))
    return found


def synthesis(messages: list[dict[str, Any]]) -> str:
    full = _last_user_prompt(messages)
    prompt = _own_words(full)
    guidance = next(
        (
            message_text(m.get("content"))
            for m in reversed(messages)
            if m.get("role") == "user" and message_text(m.get("content")).startswith(GUIDANCE_HEADER)
        ),
        "",
    )
    words = _keywords(prompt)
    topic = " ".join(words[:3])
    refs = _references_in(guidance)
    titles = ("Frame it", "Mind the edges", "Ship small")
    lines = [
        "*Simulated reply — the offline demo provider wrote this; no real model was called.*",
        "",
        f"Here is what the panel makes of **{topic}**:"
        if refs
        else f"No advisor answered this time, so here is a direct take on **{topic}**:",
        "",
    ]
    if len(refs) > 1 and len({sentences[0] for _, sentences in refs}) == 1:
        # A later layer's references, converged on one plan: it once, then what each adds.
        lines[2] = f"The panel agrees on **{topic}**: {refs[0][1][0]}"
        for label, sentences in refs:
            lines.append(f"- {sentences[-1]} *({label.split(':', 1)[-1]})*")
    else:
        for n, (label, sentences) in enumerate(refs):
            title = titles[n] if n < len(titles) else "Also"
            lines.append(f"{n + 1}. **{title}** — {sentences[0]} *({label.split(':', 1)[-1]})*")
    if refs:
        lines.append("")
    if seen := images_seen(messages):
        lines += ["What the panel was shown:", *(f"- {image}" for image in seen), ""]
    read = _attachments_read(full)
    if read:
        return "\n".join([*lines, "What the attached file says:" if len(read) < 3 else "The attached files:", *read])
    ident = _identifier(words)
    lines += [
        "A first version to start from:",
        "",
        "```python",
        f"def {ident}(items):",
        f'    """The smallest working take on {topic}; measure before optimising."""',
        "    if not items:",
        "        return []  # the edge case worth a test",
        "    return [item for item in items if item]",
        "```",
        "",
        "Run it on one real example, then ask a follow-up: the panel keeps the whole conversation.",
    ]
    return "\n".join(lines)


# --------------------------------------------------------------------------- simulated tool use

_LOOK = re.compile(r"\b(files?|folders?|director(y|ies)|readme|project|repo(sitory)?)\b", re.I)
_WRITE = re.compile(r"\b(write|create|save)\b.*\b(file|note)\b", re.I)
DEMO_NOTE = "moa-demo-note.md"


def _tool_results_since_prompt(messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(tool name, result) for the tool calls made since the user's last prompt."""
    names: dict[str, str] = {}
    results: list[tuple[str, str]] = []
    for message in messages:
        if message.get("role") == "user" and not message_text(message.get("content")).startswith(
            (GUIDANCE_HEADER, TOOL_RESULT_PREFIX)
        ):
            names, results = {}, []
        for call in message.get("tool_calls") or []:
            names[call.get("id", "")] = (call.get("function") or {}).get("name", "tool")
        if message.get("role") == "tool":
            results.append((names.get(message.get("tool_call_id", ""), "tool"), message_text(message.get("content"))))
    return results


def _tool_plan(prompt: str, offered: set[str]) -> list[ScriptedToolCall]:
    """The calls a tool-using model would make first for this prompt (none if it needs no tools)."""
    calls = []
    if _WRITE.search(prompt) and "write_file" in offered:
        content = f"# Notes\n\nWritten by the moa-chat demo for: {_quote(prompt, 80)}\n"
        calls.append(ScriptedToolCall("write_file", json.dumps({"path": DEMO_NOTE, "content": content})))
    elif _LOOK.search(prompt):
        if "list_directory" in offered:
            calls.append(ScriptedToolCall("list_directory", json.dumps({"path": "."})))
        if "readme" in prompt.lower() and "read_file" in offered:
            calls.append(ScriptedToolCall("read_file", json.dumps({"path": "README.md", "end_line": 40})))
    return calls


def _report_on_tools(results: list[tuple[str, str]]) -> str:
    lines = ["*Simulated reply — the offline demo provider wrote this after really calling the tools.*", ""]
    for name, result in results:
        body = result.splitlines()
        if name == "list_directory" and body:
            entries = [line.split("  (")[0] for line in body[1:] if not line.startswith("[")]
            shown = ", ".join(f"`{e}`" for e in entries[:12]) + (" …" if len(entries) > 12 else "")
            count = plural(len(entries), "entry", "entries")
            lines.append(f"- **The folder** holds {count}: {shown}")
        elif name == "read_file" and body:
            first = next((line.lstrip("# ").strip() for line in body[1:] if line.strip()), "")
            lines.append(f"- **{body[0].split(' (')[0]}** opens with: “{_quote(first, 100)}”")
        else:
            lines.append(f"- **{name}**: {_quote(body[0] if body else '(no output)', 120)}")
    lines += ["", "Ask about any of these and the panel will dig in."]
    return "\n".join(lines)


def respond(body: dict[str, Any]) -> Reply:
    model = str(body.get("model", ""))
    messages = body.get("messages") or []
    pace = _pace()
    last = message_text(messages[-1].get("content")) if messages else ""
    if model in MODELS and last.startswith(AGREEMENT_HEADER):
        return Reply(text=agreement_verdict(last), delay=0.2 * pace)
    if model in MODELS and last.startswith((JUDGE_PAIRWISE_LEAD, JUDGE_RUBRIC_LEAD)):
        return Reply(text=judgement(last), delay=0.2 * pace)
    if model == AGGREGATOR.model:
        delay, piece_delay = AGGREGATOR.delay * pace, AGGREGATOR.piece_delay * pace
        offered = {str((t.get("function") or {}).get("name")) for t in body.get("tools") or []}
        results = _tool_results_since_prompt(messages)
        if results:
            return Reply(text=_report_on_tools(results), delay=delay, piece_delay=piece_delay)
        prompt = _last_user_prompt(messages)
        # An attached file is already here to read: the tools are for what is not.
        plan = [] if _ATTACHED.search(prompt) else _tool_plan(prompt, offered)
        if plan:
            names = " and ".join(f"`{call.name}`" for call in plan)
            return Reply(
                text=f"Let me check with {names} first.", tool_calls=plan, delay=delay, piece_delay=piece_delay
            )
        return Reply(text=synthesis(messages), delay=delay, piece_delay=piece_delay)
    persona = next((p for p in PERSONAS if p.model == model), None)
    if persona is None:
        return Reply(status=404, error=f"the demo provider has no model {model!r}; it has: {', '.join(MODELS)}")
    text = reference_take(model, _last_user_prompt(messages))
    if seen := _images_line(messages):
        text = f"{text} {seen}"
    return Reply(text=text, delay=persona.delay * pace, piece_delay=persona.piece_delay * pace)


class DemoProvider:
    """The demo's loopback server, as a provider moa-chat manages (providers.lifecycle)."""

    def __init__(self) -> None:
        self._server = OpenAICompatibleServer(respond, models=MODELS, record=False)
        self._started = False

    def start(self, announce: Callable[[str], None] | None = None) -> None:
        self._server.start()  # at once: nothing worth announcing
        self._started = True

    @property
    def base_url(self) -> str:
        return self._server.base_url

    def stop(self) -> None:
        if self._started:  # shutting down a server that never served would wait for ever
            self._server.stop()
