"""Claude Code from npm against the real `moa-chat api` and `moa-chat mcp`, with only the loopback interface:
the panel as Claude Code's model (the aggregator calls Claude Code's Read tool on a file with a secret word),
and the panel as an MCP tool that Claude Code's model calls. The test passes when Claude Code prints the word.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from node_clients import loopback_only, node_bin

DRIVER = Path(__file__).parent / "claude_code_driver.py"


def run(mode: str, tmp_path: Path) -> dict[str, object]:
    claude = node_bin("claude")
    command = [*loopback_only(), sys.executable, str(DRIVER), mode, str(claude), str(tmp_path)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=400)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_claude_code_runs_on_the_panel_and_its_read_tool_goes_back_to_it(tmp_path):
    result = run("read", tmp_path)
    print(json.dumps(result, indent=2))  # what Claude Code printed, for the record
    assert result["returncode"] == 0, result["stderr"]
    assert result["secret"] in result["stdout"]
    assert "Read" in result["offered"] and len(result["offered"]) > 10  # Claude Code's own tools, offered
    assert result["cc_agg_requests"] == 2  # the call to Read, then the answer from what it read
    assert result["cc_ref_requests"] == 1  # one panel for the user turn: the tool round reused its answers
    assert any(result["secret"] in text for text in result["tool_results"])


def test_claude_code_consults_the_panel_through_moa_chat_mcp(tmp_path):
    result = run("mcp", tmp_path)
    print(json.dumps(result, indent=2))
    assert result["returncode"] == 0, result["stderr"]
    assert "mcp__moa__consult_panel" in result["offered"]
    assert result["panel_requests"] == 1  # the panel behind `moa-chat mcp` wrote the synthesis
    assert result["secret"] in result["stdout"]
