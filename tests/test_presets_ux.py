"""Presets say what they need: F3 cycles the ones that can run, the picker explains the rest,
`moa-chat presets` lists them in the same order."""

from __future__ import annotations

import json

from conftest import WIRE_CONFIG, write_config
from moa_chat.config import load_config
from moa_chat.providers import cycle_order, next_runnable, readiness
from moa_chat.tui.screens.preset_picker import PresetPicker
from moa_chat.tui.widgets.header import StatusHeader
from textual.widgets import OptionList
from tui_helpers import make_app, wait_until

TWO_USER_PRESETS = """\
    second:
      description: Another on the test server
      reference_models:
        - {provider: wire, model: ref-a}
      aggregator: {provider: wire, model: agg}
"""


def config_with_user_presets(home, llm_server):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").rstrip() + "\n" + TWO_USER_PRESETS
    return load_config(write_config(home, text))


def test_the_cycle_puts_the_users_presets_first_in_file_order(home, llm_server):
    config = config_with_user_presets(home, llm_server)
    names = [p.name for p in cycle_order(config)]
    assert names[:2] == ["wire", "second"]
    assert names[2:] == sorted(names[2:])  # then the bundled ones, by name


def test_next_runnable_skips_presets_without_their_key(home, llm_server, monkeypatch):
    config = config_with_user_presets(home, llm_server)
    assert not readiness(config, config.preset("openai")).runnable
    assert readiness(config, config.preset("openai")).needs == "OPENAI_API_KEY"
    stops = []
    name = "wire"
    for _ in range(len(config.presets)):
        name = next_runnable(config, name, +1).name
        stops.append(name)
    assert "openai" not in stops and "frontier" not in stops and "groq-fast" not in stops
    assert stops[:2] == ["second", "demo"]
    assert next_runnable(config, "wire", -1).name not in ("openai", "frontier")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key-000000")
    assert "openai" in [next_runnable(config, p.name, +1).name for p in cycle_order(config)]


async def test_f3_and_shift_f3_step_through_runnable_presets_only(home, llm_server):
    config = config_with_user_presets(home, llm_server)
    app = make_app(config, "wire")
    async with app.run_test(size=(120, 36)) as pilot:
        seen = []
        for _ in range(len(config.presets)):
            await pilot.press("f3")
            seen.append(app.session.preset.name)
        assert all(readiness(config, config.preset(name)).runnable for name in seen)
        assert seen[0] == "second"
        await pilot.press("shift+f3")  # xterm and tmux send ESC[1;2R, which keys.KeyParser reads as this
        assert app.session.preset.name == seen[-2]
        assert app.query_one(StatusHeader)


async def test_the_picker_dims_a_preset_without_its_key_and_explains_instead_of_switching(home, llm_server):
    config = config_with_user_presets(home, llm_server)
    app = make_app(config, "wire")
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.press("f2")
        await wait_until(pilot, lambda: isinstance(app.screen, PresetPicker))
        options = app.screen.query_one(OptionList)
        frontier = options.get_option("frontier")
        assert "needs OPENROUTER_API_KEY" in frontier.prompt.plain
        options.highlighted = options.get_option_index("frontier")
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, PresetPicker)  # still open
        why = app.screen.query_one("#picker-why")
        assert why.display and "set OPENROUTER_API_KEY" in str(why.render())
        assert app.session.preset.name == "wire"
        options.highlighted = options.get_option_index("second")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.session.preset.name == "second")


def test_presets_command_lists_in_cycle_order_and_says_what_cannot_run(home, llm_server, capsys):
    from moa_chat.cli import main

    config_with_user_presets(home, llm_server)
    assert main(["presets"]) == 0
    out = capsys.readouterr().out
    assert out.index("Your presets") < out.index("* wire") < out.index("  second") < out.index("Bundled presets")
    assert "cannot run: needs OPENROUTER_API_KEY" in out
    assert main(["presets", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    by_name = {p["name"]: p for p in listed}
    assert [p["name"] for p in listed[:2]] == ["wire", "second"]
    assert by_name["frontier"]["runnable"] is False
    assert by_name["frontier"]["missing_keys"] == ["OPENROUTER_API_KEY"]
    assert by_name["demo"]["runnable"] is True and by_name["wire"]["default"] is True


def test_presets_offers_the_models_a_running_ollama_has_and_says_when_it_is_absent(home, capsys):
    import http.server
    import json as _json
    import threading

    from moa_chat.cli import main
    from moa_chat.providers import ollama

    class Tags(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = _json.dumps({"models": [{"name": "llama3.2:latest"}, {"name": "qwen2.5:7b"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Tags)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        write_config(home, f"providers:\n  ollama:\n    base_url: http://127.0.0.1:{server.server_port}/v1\n")
        ollama.forget()
        assert main(["presets"]) == 0
        out = capsys.readouterr().out
        assert "Ollama has: llama3.2, qwen2.5:7b; not pulled: mistral, qwen2.5" in out
    finally:
        server.shutdown()
    ollama.forget()
    assert main(["presets"]) == 0  # the same address, nobody answering: nothing breaks
    assert "cannot run: needs Ollama running at http://127.0.0.1:" in capsys.readouterr().out


async def test_f3_says_once_which_presets_it_skips_and_why(home, llm_server, monkeypatch):
    config = config_with_user_presets(home, llm_server)
    app = make_app(config, "wire")
    notices: list[str] = []
    async with app.run_test(size=(120, 36)) as pilot:
        monkeypatch.setattr(app.chat, "notify", lambda message, **kwargs: notices.append(str(message)))
        await pilot.press("f3")
        await pilot.press("f3")
        skips = [n for n in notices if n.startswith("F3 skips the presets that cannot run here:")]
        assert len(skips) == 1
        assert "frontier (needs OPENROUTER_API_KEY)" in skips[0]


async def test_the_preset_toast_counts_samples_as_the_sidebar_does(home, monkeypatch):
    from moa_chat.config import load_config

    app = make_app(load_config(), "demo")
    notices: list[str] = []
    async with app.run_test(size=(120, 36)) as pilot:
        monkeypatch.setattr(app.chat, "notify", lambda message, **kwargs: notices.append(str(message)))
        app.chat.presets.switch("local")  # one model asked three times: three references
        await pilot.pause()
        assert any(n.startswith("local: 3 references →") for n in notices), notices
