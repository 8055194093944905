"""A stored session, exported: Markdown to read (each turn's reference answers, and what the aggregator
thought before a reply, folded in <details>), or JSON with everything the store holds for it (each call's
reasoning too)."""

from __future__ import annotations

from ..config.pricing import cost_label
from ..text.wording import plural
from .json_shapes import SessionJson, TurnJson
from .session_store import SessionStore, StoredTurn


def as_json(store: SessionStore, session_id: str) -> SessionJson:
    summary = store.session(session_id)
    return {
        "session": summary.as_json(),
        "messages": [
            {
                **message.as_chat(),
                "id": message.id,
                "parent_id": message.parent_id,
                "turn_id": message.turn_id,
                "partial": message.partial,
            }
            for message in store.path(summary.id)
        ],
        "turns": [_turn_json(turn) for turn in store.turns(summary.id)],
    }


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
    turns = {turn.user_message_id: turn for turn in store.turns(summary.id)}
    lines = [
        f"# {summary.title or 'Untitled session'}",
        "",
        f"*moa-chat session `{summary.id}` · preset {summary.preset} · {plural(summary.turns, 'turn')} · "
        f"{_spent(list(turns.values()))} · updated {summary.as_json()['updated']}*",
        "",
    ]
    turn: StoredTurn | None = None
    rounds = 0  # the turn's assistant messages so far: the n-th is its aggregator's round n
    for message in store.path(summary.id):
        if message.role == "user":
            turn, rounds = turns.get(message.id), 0
            lines += ["## You", "", message.content, ""]
            if turn is not None and turn.references:
                lines += ["<details>", f"<summary>The panel: {len(turn.references)} references</summary>", ""]
                for call in turn.references:
                    record = call.record
                    lines += [f"### {record.label} ({record.status})", ""]
                    lines += [call.text or f"*No answer: {record.error or record.status}*", ""]
                lines += ["</details>", ""]
            if turn is not None and turn.status == "failed":  # no reply follows: say why, under the prompt
                lines += [f"*The turn failed: {turn.error or 'no reason was given'}*", ""]
        elif message.role == "assistant":
            aggregator = (turn.preset_json.get("aggregator") or {}) if turn else {}
            who = f"{aggregator.get('provider')}:{aggregator.get('model')}" if aggregator else "assistant"
            rounds += 1
            thought = _thought(turn, rounds)
            if message.content:
                lines += [f"## moa-chat ({who})", "", *thought, message.content, ""]
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
            lines += [
                "<details>",
                "<summary>tool result</summary>",
                "",
                "```",
                message.content,
                "```",
                "",
                "</details>",
                "",
            ]
    return "\n".join(lines).rstrip() + "\n"
