"""What goes to the models besides the prompt: a system prompt, and attached files."""

from __future__ import annotations

import pytest
from conftest import WIRE_CONFIG, write_config
from loop_helpers import tool_loop
from moa_chat.config import ConfigError, load_config
from moa_chat.session import ChatSession
from moa_chat.session.attachments import (
    MAX_FILE_CHARACTERS,
    AttachmentError,
    attach,
    mentioned_files,
    read_attachment,
    split_attachments,
)
from moa_chat.tui.widgets.chat_log import UserPrompt
from tui_helpers import make_app, run_turn

QUESTION = [{"role": "user", "content": "hello"}]


def config_with(home, llm_server, *, top: str = "", preset: str = ""):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra=preset)
    return load_config(write_config(home, text + top))


# --------------------------------------------------------------------------- system prompt


def test_a_global_system_prompt_goes_first_to_the_aggregator_only(home, llm_server):
    config = config_with(home, llm_server, top="system_prompt: |\n  Answer in French.\n")
    ChatSession(config, config.preset("wire")).send("hello")
    sent = llm_server.requests_for("agg")[0].messages
    assert sent[0] == {"role": "system", "content": "Answer in French."}
    # The references keep their advisor prompt and never see the user's system prompt (as before).
    assert all("Answer in French" not in str(r.messages) for r in llm_server.requests_for("ref-a"))


def test_a_presets_system_prompt_wins_and_ask_system_wins_over_both(home, llm_server):
    config = config_with(
        home, llm_server, top="system_prompt: global one\n", preset="      system_prompt: the preset's own"
    )
    ChatSession(config, config.preset("wire")).send("hello")
    assert llm_server.requests_for("agg")[-1].messages[0]["content"] == "the preset's own"
    ChatSession(config, config.preset("wire"), system_prompt="given").send("hello")
    assert llm_server.requests_for("agg")[-1].messages[0]["content"] == "given"
    # The tool loop sends a conversation as it is given: an API client's starts with its own system message.
    tool_loop(config).run([{"role": "system", "content": "mine"}, *QUESTION])
    assert llm_server.requests_for("agg")[-1].messages[0]["content"] == "mine"


def test_a_system_prompt_that_is_not_text_is_a_config_error_with_its_line(home, llm_server):
    with pytest.raises(ConfigError, match=r"config.yaml:\d+: config.yaml: system_prompt must be text"):
        config_with(home, llm_server, top="system_prompt: [a, b]\n")


def test_ask_system_sends_it(home, llm_server, capsys):
    from moa_chat.cli import main

    config_with(home, llm_server)
    assert main(["ask", "--no-save", "-q", "--system", "Be brief.", "hi"]) == 0
    assert llm_server.requests_for("agg")[-1].messages[0] == {"role": "system", "content": "Be brief."}


# --------------------------------------------------------------------------- attachments


def test_an_attached_file_is_sent_between_markers_and_read_back_as_a_chip(tmp_path):
    (tmp_path / "notes.txt").write_text("line one\nline two\n")
    content = attach("summarise this", [read_attachment(tmp_path / "notes.txt", base=tmp_path)])
    assert content.startswith("summarise this\n\n<attached-file path=")
    assert "line one\nline two\n" in content
    typed, chips = split_attachments(content)
    assert typed == "summarise this"
    assert [(c.path.endswith("notes.txt"), c.characters, c.cut) for c in chips] == [(True, 18, False)]


def test_a_large_file_is_cut_and_says_so(tmp_path):
    (tmp_path / "big.log").write_text("x" * (MAX_FILE_CHARACTERS + 10))
    attachment = read_attachment(tmp_path / "big.log", base=tmp_path)
    assert attachment.cut and len(attachment.text) == MAX_FILE_CHARACTERS
    assert f'cut="{MAX_FILE_CHARACTERS}"' in attach("p", [attachment])
    assert split_attachments(attach("p", [attachment]))[1][0].cut


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: None, "no such file"),
        (lambda p: p.mkdir(), "not a regular file"),
        (lambda p: p.write_bytes(b"\x7fELF\0\0\0"), "looks binary"),
        (lambda p: p.write_bytes(b"caf\xe9"), "not UTF-8"),
    ],
)
def test_a_file_that_cannot_be_attached_says_why(tmp_path, make, message):
    target = tmp_path / "thing"
    make(target)
    with pytest.raises(AttachmentError, match=message):
        read_attachment(target, base=tmp_path)


def test_mentions_name_existing_files_only(tmp_path):
    (tmp_path / "a.py").write_text("")
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "b.md").write_text("")
    prompt = "look at @a.py, @docs/b.md and @missing.txt; mail me@example.com"
    assert mentioned_files(prompt, tmp_path) == ["a.py", "docs/b.md"]


def test_ask_attach_sends_the_files_and_a_bad_one_exits_2(home, llm_server, tmp_path, capsys, monkeypatch):
    from moa_chat.cli import main

    monkeypatch.chdir(tmp_path)
    config_with(home, llm_server)
    (tmp_path / "spec.md").write_text("# Spec\nThe frobnicator frobs.\n")
    assert main(["ask", "--no-save", "-a", str(tmp_path / "spec.md"), "what does it do?"]) == 0
    sent = llm_server.requests_for("agg")[-1].messages[-2]["content"]  # before the guidance
    assert sent.startswith("what does it do?") and "The frobnicator frobs." in sent
    assert "attached" in capsys.readouterr().err
    assert main(["ask", "--no-save", "-a", str(tmp_path / "nope.md"), "x"]) == 2
    assert "cannot attach" in capsys.readouterr().err


async def test_at_path_in_the_chat_attaches_the_file_and_shows_a_chip(home, llm_server, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "todo.txt").write_text("buy milk\n")
    config = config_with(home, llm_server)
    app = make_app(config, "wire")
    async with app.run_test(size=(100, 30)) as pilot:
        await run_turn(pilot, "what is on @todo.txt?")
        message = app.query_one(UserPrompt)
        assert [c.path for c in message.attachments] == ["todo.txt"]
        shown = message.render().plain
        assert "📎 todo.txt · 9 chars" in shown and "buy milk" not in shown
        assert "buy milk" in llm_server.requests_for("agg")[-1].messages[-2]["content"]
