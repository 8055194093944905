"""A stored session, exported: Markdown to read (each turn's reference answers, and what the aggregator
thought before a reply, folded in <details>), or JSON with everything the store holds for it (each call's
reasoning too).

Both keep every attempt: a re-asked, regenerated or edited exchange has several versions, one of them on the
conversation shown. The JSON lists the conversation shown, in order, then the other versions' messages
(`shown` says which is which), and every turn; the Markdown follows the conversation shown and, under each
exchange that has others, folds its other versions in <details>.
"""

from __future__ import annotations

import re

from ..config.pricing import cost_label
from ..images import IMAGE_MARKER
from ..text.wording import plural
from .json_shapes import SessionJson, TurnJson
from .records import StoredMessage, StoredTurn
from .session_store import SessionStore


def as_json(store: SessionStore, session_id: str) -> SessionJson:
    summary = store.session(session_id)
    path = store.path(summary.id)
    shown = {message.id for message in path}
    others = [message for message in _every_message(store, summary.id) if message.id not in shown]
    return {
        "session": summary.as_json(),
        "messages": [
            {
                **message.as_chat(),
                "id": message.id,
                "parent_id": message.parent_id,
                "turn_id": message.turn_id,
                "partial": message.partial,
                "shown": message.id in shown,
            }
            for message in (*path, *others)
        ],
        "turns": [_turn_json(turn) for turn in store.turns(summary.id)],
    }


def _every_message(store: SessionStore, session_id: str) -> list[StoredMessage]:
    """Every message of the session, every version's, oldest first."""
    found: list[StoredMessage] = []
    below = store.children(None, session_id)
    while below:
        found += below
        below = [child for message in below for child in store.children(message.id, session_id)]
    return sorted(found, key=lambda message: message.id)


def _turn_json(turn: StoredTurn) -> TurnJson:
    return {
        "id": turn.id,
        "kind": turn.kind,
        "user_message_id": turn.user_message_id,
        "preset": turn.preset_json,
        "status": turn.status,
        "error": turn.error,
        "seconds": turn.seconds,
        "calls": [
            {**call.record.as_dict(), "text": call.text, "reasoning": call.reasoning or None} for call in turn.calls
        ],
    }


def _spent(turns: list[StoredTurn]) -> str:
    """Tokens and cost over the turns' calls, as the chat's header says them: "tokens n/a" where no provider
    reported any (llama.cpp's server does not), and no cost where no call has a price."""
    records = [call.record for turn in turns for call in turn.calls]
    reported = [r.usage for r in records if r.usage is not None]
    tokens = f"{sum(u.total_tokens for u in reported):,} tokens" if reported else "tokens n/a"
    costs = [r.cost for r in records if r.cost is not None]
    if not costs:
        return tokens
    complete = all(r.cost is not None for r in records if r.usage is not None)
    return f"{tokens} · {cost_label(sum(costs), complete=complete)}"


def _thought(turn: StoredTurn | None, iteration: int) -> list[str]:
    """What the aggregator thought in this round, folded (nothing when it sent no reasoning)."""
    calls = turn.calls if turn is not None else ()
    rounds = (c for c in calls if c.record.role == "aggregator" and c.record.iteration == iteration)
    reasoning = next((c.reasoning for c in rounds), "")
    if not reasoning:
        return []
    return ["<details>", "<summary>Thinking</summary>", "", reasoning.strip(), "", "</details>", ""]


def as_markdown(store: SessionStore, session_id: str) -> str:
    summary = store.session(session_id)
    turns = store.turns(summary.id)
    lines = [
        f"# {summary.title or 'Untitled session'}",
        "",
        f"*moa-chat session `{summary.id}` · preset {summary.preset} · {plural(summary.turns, 'turn')} · "
        f"{_spent(turns)} · updated {summary.as_json()['updated']}*",
        "",
    ]
    path = store.path(summary.id)
    for start, exchange in enumerate(path):
        if exchange.role != "user":
            continue
        end = next((n for n in range(start + 1, len(path)) if path[n].role == "user"), len(path))
        lines += _exchange(path[start:end], turns)
        lines += _other_versions(store, summary.id, path[start:end], turns)
    return "\n".join(lines).rstrip() + "\n"


def _turn_of(exchange: list[StoredMessage], turns: list[StoredTurn]) -> StoredTurn | None:
    """The turn that wrote this version of an exchange: its reply's; for a prompt with no reply (a failed turn),
    the last turn that answered the prompt."""
    by_id = {turn.id: turn for turn in turns}
    replied = next((m.turn_id for m in exchange[1:] if m.turn_id is not None), None)
    if replied is not None and replied in by_id:
        return by_id[replied]
    asked = [turn for turn in turns if turn.user_message_id == exchange[0].id]
    return asked[-1] if asked else None


def _with_embedded_images(prompt: StoredMessage) -> str:
    """A prompt's text with each attached image embedded where its marker stands (a data: URL, as sent)."""
    urls = iter(
        str(part["image_url"]["url"])  # type: ignore[index]
        for part in prompt.parts or ()
        if part.get("type") == "image_url"
    )

    def embed(match: re.Match[str]) -> str:
        url = next(urls, None)
        name = match["path"].replace("]", ")")
        return f"![{name}]({url})" if url is not None else f"*(image {name}, no longer kept)*"

    return IMAGE_MARKER.sub(embed, prompt.content)


def _exchange(exchange: list[StoredMessage], turns: list[StoredTurn], heading: str = "##") -> list[str]:
    """A prompt, its turn's reference answers and its reply (with tool calls and results), as Markdown."""
    prompt = exchange[0]
    turn = _turn_of(exchange, turns)
    lines = [f"{heading} You", "", _with_embedded_images(prompt), ""]
    if turn is not None and turn.references:
        lines += ["<details>", f"<summary>The panel: {len(turn.references)} references</summary>", ""]
        for call in turn.references:
            record = call.record
            lines += [f"{heading}# {record.label} ({record.status})", ""]
            lines += [call.text or f"*No answer: {record.error or record.status}*", ""]
        lines += ["</details>", ""]
    if turn is not None and turn.status == "failed" and len(exchange) == 1:  # no reply follows: say why
        lines += [f"*The turn failed: {turn.error or 'no reason was given'}*", ""]
    rounds = 0  # the turn's assistant messages so far: the n-th is its aggregator's round n
    for message in exchange[1:]:
        if message.role == "assistant":
            aggregator = (turn.preset_json.get("aggregator") or {}) if turn else {}
            who = f"{aggregator.get('provider')}:{aggregator.get('model')}" if aggregator else "assistant"
            rounds += 1
            thought = _thought(turn, rounds)
            if message.content:
                lines += [f"{heading} moa-chat ({who})", "", *thought, message.content, ""]
            else:
                lines += thought
            for tool_call in message.tool_calls or []:
                function = tool_call.get("function")
                name, arguments = (function.get("name"), function.get("arguments", "")) if function else (None, "")
                lines += [f"> tool call `{name}` {arguments}", ""]
            if message.partial or (turn is not None and not turn.complete):
                lines += [f"*This reply is incomplete ({turn.status if turn else 'partial'}).*", ""]
            elif turn is not None and message.content:
                lines += [f"*{who} · {turn.seconds or 0:.1f}s · {_spent([turn])}*", ""]
        elif message.role == "tool":
            lines += ["<details>", "<summary>tool result</summary>", "", "```", message.content, "```", ""]
            lines += ["</details>", ""]
    return lines


def _other_versions(
    store: SessionStore, session_id: str, shown: list[StoredMessage], turns: list[StoredTurn]
) -> list[str]:
    """The exchange's other versions (re-asked, regenerated, edited), oldest first, folded: each its prompt
    when it differs, its panel and its reply."""
    prompt = shown[0]
    starts = store.alternatives(session_id, prompt.id)
    if len(starts) < 2:
        return []
    shown_ids = {message.id for message in shown}
    lines = ["<details>", f"<summary>Other versions of this exchange: {len(starts) - 1}</summary>", ""]
    for number, start in enumerate(starts, 1):
        if start in shown_ids:
            continue
        version = _version(store, session_id, start)
        turn = _turn_of(version, turns)
        kind = {"ask": "asked", "reask": "re-asked", "regenerate": "regenerated", "edit": "edited"}
        how = kind.get(turn.kind, turn.kind) if turn is not None else "asked"
        lines += [f"### Version {number} of {len(starts)} ({how})", ""]
        body = _exchange(version, turns, heading="####")
        if version[0].content == prompt.content:
            body = body[4:]  # the same prompt: not again
        lines += [*body]
    return [*lines, "</details>", ""]


def _version(store: SessionStore, session_id: str, start: int) -> list[StoredMessage]:
    """One version of an exchange: its prompt and its reply with the tool rounds under it (the newest branch),
    up to the next prompt."""
    leaf = store.latest_leaf(start)
    path = store.path(session_id, leaf)
    begin = next(n for n, message in enumerate(path) if message.id == start)
    if path[begin].role != "user":
        begin -= 1  # a reply: its prompt is the message before it
    end = next((n for n in range(begin + 1, len(path)) if path[n].role == "user"), len(path))
    return path[begin:end]
