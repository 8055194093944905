"""How often the local model (SmolLM2-135M via llama.cpp) copies moa-chat's internal markers into its reply: the
guidance as it was written before (`### Reference N — label` headings, no closing line) against the guidance as it
is (bracketed marker lines and a closing line saying what they are), side by side in one run, on the same
reference answers; and what the user is shown once the echo filter has taken marker lines out.

Each task of the bundled sets is asked of three references, as the `local` preset asks them (the advisor prompt,
its samples' temperatures, 256 tokens); their answers go into both forms of the guidance, and the aggregator
(384 tokens, the server's temperature) answers each form `--samples` times.

    python bench/guidance_leaks.py [--tasks 10] [--samples 2]
"""

from __future__ import annotations

import argparse
import re
import sys
import time

from harness import scratch_home

# The guidance as moa-chat wrote it before its markers were marked: a header, Markdown headings, no end.
OLD_HEADER = "[Mixture-of-Agents guidance — written by advisor models, not by the user]"
OLD_LEAK = re.compile(r"^\s*(?:\[Mixture-of-Agents|#{1,6}\s*(?:Reference|Answer) \d+)", re.M)


def old_guidance(answers: list[tuple[str, str]]) -> str:
    lines = [
        OLD_HEADER,
        "",
        f"{len(answers)} advisor models read this conversation and answered the latest request. They could not use "
        "tools or see anything beyond the conversation. Weigh their answers: keep what is right, fix what is wrong, "
        "fill gaps. Then reply to the user yourself, in your own voice, using tools where they help. Don't mention "
        "the advisors unless asked.",
    ]
    for number, (label, text) in enumerate(answers, 1):
        lines += ["", f"### Reference {number} — {label}", "", text.strip()]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=10, help="tasks from each bundled set (default 10)")
    parser.add_argument("--samples", type=int, default=2, help="aggregator replies per form and task (default 2)")
    args = parser.parse_args()
    import os

    os.environ.setdefault("MOA_CHAT_HOME", scratch_home())
    import openai
    from moa_chat.config import load_config
    from moa_chat.engine.echoes import without_echoes
    from moa_chat.engine.events import CallRecord, ReferenceFinished
    from moa_chat.engine.guidance import guidance_message, reference_messages
    from moa_chat.engine.panel import panel
    from moa_chat.eval.answer_key import DEFAULT_SEED, arranged
    from moa_chat.eval.tasks import load_tasks
    from moa_chat.llm.messages import user
    from moa_chat.prompts import MARKER_LINE, message_text
    from moa_chat.providers import lifecycle

    url = lifecycle.start("local")
    if url is None:
        print("the local model cannot start here:", lifecycle.unavailable("local"), file=sys.stderr)
        return 1
    client = openai.OpenAI(base_url=url, api_key="local", max_retries=0, timeout=600)
    preset = load_config().preset("local")
    seats = [seat for seat in panel(preset) if seat.layer == 1]
    aggregator = preset.aggregator
    tasks = [t for name in ("multiple_choice", "arithmetic") for t in load_tasks(name).tasks[: args.tasks]]
    tasks = arranged(tasks, DEFAULT_SEED)

    def ask(messages: list[object], temperature: float | None, max_tokens: int | None) -> str:
        extra = {"temperature": temperature} if temperature is not None else {}
        reply = client.chat.completions.create(
            model=aggregator.model,
            messages=messages,
            max_tokens=max_tokens,
            **extra,  # type: ignore[arg-type]
        )
        return reply.choices[0].message.content or ""

    def leaks(text: str) -> bool:
        return any(MARKER_LINE.fullmatch(line) for line in text.splitlines()) or bool(OLD_LEAK.search(text))

    counts = {"before": 0, "after": 0, "after, filtered": 0}
    replies = 0
    started = time.monotonic()
    for number, task in enumerate(tasks, 1):
        prompt = [user(task.text())]
        request = reference_messages(prompt)
        answers = [(seat.label, ask(request, seat.slot.temperature, seat.slot.max_tokens)) for seat in seats]
        finished = tuple(
            ReferenceFinished(CallRecord("reference", label, n, 1, "ok"), text)
            for n, (label, text) in enumerate(answers)
        )
        forms = {
            "before": old_guidance(answers),
            "after": message_text(guidance_message(finished)["content"]),
        }
        for _ in range(args.samples):
            for form, guidance in forms.items():
                text = ask([*prompt, user(guidance)], aggregator.temperature, aggregator.max_tokens)
                counts[form] += leaks(text)
                if form == "after":
                    counts["after, filtered"] += leaks(without_echoes(text))
            replies += 1
        print(
            f"{number}/{len(tasks)} tasks · {replies} replies per form · "
            + " · ".join(f"{form}: {n}" for form, n in counts.items()),
            file=sys.stderr,
        )
    minutes = (time.monotonic() - started) / 60
    print(f"replies that carry an internal marker, of {replies} per form ({len(tasks)} tasks, {minutes:.0f} min):")
    for form, n in counts.items():
        print(f"  {form:<16} {n:>3}  ({100 * n / max(replies, 1):.0f}%)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
