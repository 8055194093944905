"""A failed turn's prompt is kept out of what the models are sent next (in the chat's session and in `ask -c`),
so two prompts never reach a model glued together; the store keeps the failed exchange."""

from __future__ import annotations

from moa_chat.providers.loopback_server import Reply

GUIDANCE = "[Mixture-of-Agents guidance"  # the panel's answers reach the aggregator as a user message after the history


def _conversation(request) -> list[dict]:
    return [
        m
        for m in request.body["messages"]
        if m["role"] != "system" and not (isinstance(m["content"], str) and m["content"].startswith(GUIDANCE))
    ]


def _prompts(request) -> list[str]:
    return [m["content"] for m in _conversation(request) if m["role"] == "user"]


def test_a_failed_prompt_is_not_sent_glued_to_the_next_one(wire_config, llm_server, home):
    """The models see the answered exchanges and the prompt being sent; the failed prompt stays in the store."""
    from moa_chat.session import ChatSession
    from moa_chat.store import SessionStore

    config = wire_config()
    llm_server.script("agg", [Reply(text="First answer."), Reply(status=500, error="down"), Reply(text="Second.")])
    store = SessionStore()
    session = ChatSession(config, config.preset("wire"), store=store)
    assert session.send("one").status == "ok"
    assert session.send("two, which fails").status == "failed"
    assert session.send("two again").status == "ok"
    *_, last = llm_server.requests_for("agg")
    assert _prompts(last) == ["one", "two again"]
    roles = [m["role"] for m in _conversation(last)]
    assert roles == ["user", "assistant", "user"]  # no two prompts in a row
    for reference in ("ref-a", "ref-b", "ref-c"):
        *_, asked = llm_server.requests_for(reference)
        assert _prompts(asked) == ["one", "two again"], _prompts(asked)
        assert "two, which fails" not in str(asked.body["messages"])
    # Kept where a reader looks: the store holds the failed exchange, marked failed.
    history = session.history()
    assert [e.prompt for e in history] == ["one", "two, which fails", "two again"]
    assert history[1].turn is not None and history[1].turn.status == "failed" and not history[1].reply


def test_a_continued_session_leaves_its_failed_prompt_out_too(wire_config, llm_server, home, capsys):
    from moa_chat.cli import main

    wire_config()
    llm_server.script("agg", [Reply(status=500, error="down"), Reply(text="Answered.")])
    assert main(["ask", "the question"]) == 1
    assert main(["ask", "-c", "the question, again"]) == 0
    capsys.readouterr()
    requests = llm_server.requests_for("agg")
    assert len(requests) == 2
    assert _prompts(requests[-1]) == ["the question, again"]
