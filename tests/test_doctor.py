"""`moa-chat doctor`: a broken config, a missing key, an unreachable endpoint, and all well."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from conftest import WIRE_CONFIG, write_config
from moa_chat.cli import main


def run(capsys, *args: str) -> tuple[int, str]:
    code = main(["doctor", *args])
    return code, capsys.readouterr().out


def test_all_well_on_a_working_config(home, llm_server, capsys):
    write_config(home, WIRE_CONFIG.format(base_url=llm_server.base_url, extra=""))
    llm_server.server.models = ["agg", "ref-a"]
    code, out = run(capsys)
    assert code == 0, out
    assert "✓ preset wire: 3 references → wire:agg" in out
    assert "✓ wire: answers (2 models listed)" in out
    assert "✓ data folder:" in out and out.rstrip().endswith("all is well")


def test_a_broken_config_is_reported_with_its_line(home, capsys):
    write_config(home, "moa:\n  presets:\n    x: [oops\n")
    code, out = run(capsys)
    assert code == 1
    assert out.startswith("✗ config: ") and "config.yaml:4: invalid YAML" in out and "fix:" in out


def test_a_missing_key_is_named_never_printed(home, llm_server, capsys, monkeypatch):
    text = WIRE_CONFIG.format(base_url=llm_server.base_url, extra="").replace(
        "    max_retries: 0\n", "    max_retries: 0\n    api_key_env: WIRE_DOCTOR_KEY\n"
    )
    write_config(home, text)
    code, out = run(capsys)
    assert code == 1
    assert "✗ wire: WIRE_DOCTOR_KEY is not set" in out and "fix: export WIRE_DOCTOR_KEY=..." in out
    monkeypatch.setenv("WIRE_DOCTOR_KEY", "sk-doctor-secret-value-0000000000")
    code, out = run(capsys)
    assert "✓ wire: WIRE_DOCTOR_KEY is set" in out and "sk-doctor-secret" not in out


def test_an_unreachable_endpoint_is_reported(home, capsys):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    write_config(
        home,
        f"""
        providers:
          gone: {{base_url: "http://127.0.0.1:{port}/v1"}}
        moa:
          presets:
            mine:
              reference_models: [{{provider: gone, model: m}}]
              aggregator: {{provider: gone, model: m}}
        """,
    )
    code, out = run(capsys)
    assert code == 1
    assert f"✗ gone: could not list its models: connection refused by http://127.0.0.1:{port}/v1" in out


@pytest.mark.parametrize(
    ("text", "first", "exit_code"),
    [("moa:\n  default_preset: demo\n", "✓ config: ", 0), ("moa:\n  presets:\n    x: [oops\n", "✗ config: ", 1)],
    ids=["good", "broken"],
)
def test_one_run_loads_the_config_once(home, capsys, monkeypatch, text, first, exit_code):
    """Once in all, not once to dispatch and again in the doctor. The loader's cache hides a second read of
    a good file, so the loads are counted too, where the command line and the doctor call them."""
    import moa_chat.cli.dispatch as dispatch_module
    import moa_chat.cli.doctor as doctor_module
    from moa_chat.config import load_config

    path = write_config(home, text)
    loads: list[Path | None] = []
    reads: list[Path] = []
    read_text = Path.read_text

    def counted_load(config_path=None):
        loads.append(config_path)
        return load_config(config_path)

    def counted_read(self, *args, **kwargs):
        if self == path:
            reads.append(self)
        return read_text(self, *args, **kwargs)

    for module in (dispatch_module, doctor_module):
        monkeypatch.setattr(module, "load_config", counted_load)
    monkeypatch.setattr(Path, "read_text", counted_read)
    code, out = run(capsys)
    assert code == exit_code and out.startswith(first), out
    assert (len(loads), len(reads)) == (1, 1)
