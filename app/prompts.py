"""The words moa-chat puts in front of models, and the markers that make them recognisable.

They sit at the bottom of the package because two sides read them: the engine writes them into
requests, and the offline demo provider, playing a model, recognises them in what it receives.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ADVISOR_PROMPT = """\
You are an advisor on a Mixture-of-Agents panel. Several advisors answer the same conversation; \
another model, the acting model, reads all of your answers and then writes the reply the user sees \
(it may also use tools).

You cannot act. You have no tools: you cannot read files, run commands, browse or call anything, and \
you must never claim or imply that you did. Where a tool call or its result appears in the \
conversation, it was made by the acting model; you may reason about it.

Give your best answer to the user's latest request: correct, concrete and concise. Point out \
pitfalls, wrong assumptions and better approaches. If you are unsure, say so. Do not address the \
acting model or describe this setup; just answer."""

CONTINUE_PROMPT = "(Continue from the conversation above: what should happen next?)"
# Markers the guidance and the reference view put in messages (the demo provider reads them back). Each is one
# line in square brackets, and the guidance ends by saying so: a model that copies one into its reply anyway
# is caught by one rule (MARKER_LINE), and the line is taken out of what the user sees (engine/echoes.py).
GUIDANCE_HEADER = "[Mixture-of-Agents guidance — written by advisor models, not by the user]"
LAYER_HEADER = "[Mixture-of-Agents — answers from the previous layer of advisors, not from the user]"
GUIDANCE_END = (
    "[End of the advisors' answers. Now write your reply to the user, in your own words. The lines in square "
    "brackets are moa-chat's markers, not part of any answer: never write them in your reply.]"
)
LAYER_END = (
    "[End of the other advisors' answers. Now write your own answer to the request. The lines in square "
    "brackets are moa-chat's markers, not part of any answer: never write them in your answer.]"
)
TOOL_RESULT_PREFIX = "[result of tool"
# The summary of a compacted conversation's earlier exchanges, as the models read it in their place.
SUMMARY_HEADER = "[Summary of the earlier conversation, written by moa-chat to keep it within the models' windows]"
COMPACT_PROMPT = """\
You condense a conversation so that it can go on within a model's limited context window. Later turns will \
see your summary instead of the exchanges it covers, so anything you leave out is lost to them.

Write a summary of the conversation below, in the language the user writes in. Keep, as precisely as they \
were stated: what the user wants and why; decisions made and constraints agreed; facts, names, numbers, \
file paths, commands, code identifiers and short code the conversation relies on; what was tried and what \
happened; open questions; and what was being done last. Leave out greetings, repetition and reasoning \
that led nowhere. Write plain statements in short paragraphs or a list, not a dialogue. Do not answer any \
request in it. Stay under {words} words."""
COMPACT_EARLIER = "The summary of what came before these exchanges (fold it into yours):"
COMPACT_EXCHANGES = "The exchanges to summarise:"


def reference_heading(number: int, label: str | None, note: str = "") -> str:
    """The line above one advisor's answer in the aggregator's guidance: `[Reference 2 — openai:gpt-4.1]`."""
    return f"[Reference {number}{f' — {label}' if label else ''}{note}]"


def answer_heading(number: int, label: str | None, note: str = "") -> str:
    """The line above one answer of the previous layer, for a later layer's advisor: `[Answer 2 — …]`."""
    return f"[Answer {number}{f' — {label}' if label else ''}{note}]"


# A line that is one of those markers (or the Markdown headings they were once written as), alone on its line.
MARKER_LINE = re.compile(
    r"[ \t]*(?:\[(?:Mixture-of-Agents\b|Reference \d+\b|Answer \d+\b|End of the (?:other )?advisors' answers\b)[^\n]*\]"
    r"|#{1,6}[ \t]*(?:Reference|Answer) \d+(?: — \S+:\S*(?: #\d+)?)?(?: \([^)\n]*\))?)[ \t]*"
)
# How a marker line can start: a line that starts like one is held back until it ends (engine/echoes.py).
MARKER_STARTS = ("[Mixture-of-Agents", "[Reference ", "[Answer ", "[End of the ", "#")


def message_text(content: object) -> str:
    """The text of a message's content, whether a string or a list of content parts."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, Iterable):
        return ""
    parts: list[str] = []
    for part in content:
        if isinstance(part, dict):
            if part.get("type") == "text":
                parts.append(str(part.get("text", "")))
            elif part.get("type") in ("image_url", "input_image"):
                parts.append("[image]")
        elif isinstance(part, str):
            parts.append(part)
    return "\n".join(parts)


# `layers: auto`: the short judgement of whether a layer's references already agree (engine/agreement.py).
AGREEMENT_HEADER = "[Mixture-of-Agents — do these answers agree?]"
AGREEMENT_PROMPT = """\
You check whether several answers to the same request agree. They agree when they reach the same \
conclusion or final answer, even if they word it differently or give different detail. They disagree \
when they give different final answers, contradict each other on a point that matters, or recommend \
different courses of action.

Do not answer the request yourself and do not explain. Reply with exactly one word: AGREE or DISAGREE."""

# `moa-chat eval --judge`: one answer against another, asked twice with the two swapped (position bias cancels).
# Each judge prompt's first line is also how the demo's models know they are asked to judge (providers/demo.py).
JUDGE_PAIRWISE_LEAD = "You are an impartial judge comparing two answers to the same user request."
JUDGE_RUBRIC_LEAD = "You are an impartial judge scoring one answer to a user request against a rubric."
JUDGE_PAIRWISE_PROMPT = (
    JUDGE_PAIRWISE_LEAD
    + """

[User request]
{prompt}

[Answer A]
{first}

[Answer B]
{second}

Judge which answer serves the user better: correct first, then complete, clear and concise. Ignore the \
order the answers are shown in and their length as such. Explain briefly, then end with one verdict on its \
own line: [[A]] if A is better, [[B]] if B is better, [[C]] for a tie."""
)

# `moa-chat eval --judge ... --rubric`: one answer scored against a rubric (the task's `rubric:` or this default).
JUDGE_RUBRIC_PROMPT = (
    JUDGE_RUBRIC_LEAD
    + """

[User request]
{prompt}

[Rubric]
{rubric}

[Answer]
{answer}

Explain briefly how well the answer meets the rubric, then end with its score from 0 (fails it) to 10 \
(meets all of it) on its own line, written as [[score]], for example [[7]]."""
)

DEFAULT_RUBRIC = "Correct, complete, clear and concise; no invented facts."
