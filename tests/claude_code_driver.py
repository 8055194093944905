"""Claude Code against `moa-chat api`, whole: the scripted provider, the real `moa-chat api` process and
`claude -p`, all started here, so that the test can run this file inside a network namespace with only the
loopback interface (tests/node_clients.py). Prints one JSON object: what Claude Code printed, its exit
status, and what the panel's aggregator was sent.

    python claude_code_driver.py read|mcp CLAUDE WORKDIR
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from api_helpers import start_api, wire_presets
from conftest import write_config
from moa_chat.providers.loopback_server import Reply, ScriptedToolCall
from node_clients import QUIET
from scripted_server import ScriptedServer

WORD = re.compile(r"SECRET-[A-Z0-9]+")
CLAUDE_PRESET = """
    cc:
      description: The model Claude Code runs on, scripted
      reference_models:
        - provider: wire
          model: cc-ref
      aggregator:
        provider: wire
        model: cc-agg
"""


def tool_results(body: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in body["messages"] if m.get("role") == "tool"]


def offered(body: dict[str, Any]) -> list[str]:
    return [tool["function"]["name"] for tool in body.get("tools") or []]


def main() -> None:
    mode, claude, work = sys.argv[1], sys.argv[2], Path(sys.argv[3])
    home = work / "moa-home"
    home.mkdir(parents=True, exist_ok=True)
    os.environ["MOA_CHAT_HOME"] = str(home)
    os.environ["MOA_CHAT_DEMO_PACE"] = "0"
    os.environ["MOA_CHAT_OFFLINE_PRESET"] = "demo"
    project = work / "project"
    project.mkdir(exist_ok=True)
    secret = "SECRET-" + os.urandom(4).hex().upper()
    (project / "notes.txt").write_text(f"The word for today is {secret}.\n")
    llm = ScriptedServer()
    write_config(home, wire_presets(llm.base_url, CLAUDE_PRESET))

    def cc_agg(body: dict[str, Any]) -> Reply:
        results = tool_results(body)
        if mode == "read":
            if not results:
                read = json.dumps({"file_path": str(project / "notes.txt")})
                return Reply(text="Reading the notes.", tool_calls=[ScriptedToolCall("Read", read, id="toolu_read1")])
            found = WORD.search(" ".join(results))
            return Reply(text=f"The word is {found.group(0) if found else 'NOT FOUND'}.")
        name = next((n for n in offered(body) if n.endswith("consult_panel")), None)
        asked = any("linker" in text for text in results)
        if name is None and not asked:  # its MCP servers still connecting: a model waits for them
            return Reply(tool_calls=[ScriptedToolCall("WaitForMcpServers", "{}", id=f"toolu_wait{len(results)}")])
        if not asked:
            question = json.dumps({"question": "Why is the build slow?", "context": "make takes 10 minutes"})
            return Reply(tool_calls=[ScriptedToolCall(str(name), question, id="toolu_panel1")])
        return Reply(text=f"The panel says: {results[-1]}")

    llm.script("cc-agg", cc_agg)
    llm.script("agg", Reply(text=f"The linker is slow; the panel's word is {secret}."))
    api = start_api(home, "--preset", "cc")
    args = [claude, "-p", "What is the word in notes.txt? Answer with the word.", "--model", "cc"]
    if mode == "read":
        args += ["--allowedTools", "Read"]
    else:
        server = {"command": sys.executable, "args": ["-m", "moa_chat", "mcp", "--preset", "wire"],
                  "env": {"MOA_CHAT_HOME": str(home), "MOA_CHAT_DEMO_PACE": "0"}}  # fmt: skip
        (work / "mcp.json").write_text(json.dumps({"mcpServers": {"moa": server}}))
        args = [claude, "-p", "Ask the panel why the build is slow.", "--model", "cc",
                "--mcp-config", str(work / "mcp.json"), "--allowedTools", "mcp__moa__consult_panel"]  # fmt: skip
    claude_home = work / "claude-home"
    claude_home.mkdir(exist_ok=True)
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(claude_home),
        "ANTHROPIC_BASE_URL": api.root,
        "ANTHROPIC_API_KEY": api.token,
        "ANTHROPIC_SMALL_FAST_MODEL": "cc",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL": "cc",
        **QUIET,
    }
    try:
        done = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=240,
                              stdin=subprocess.DEVNULL)  # fmt: skip
    finally:
        api.stop()
    agg = [r.body for r in llm.requests_for("cc-agg")]
    print(json.dumps({
        "secret": secret,
        "stdout": done.stdout,
        "stderr": done.stderr[-2000:],
        "returncode": done.returncode,
        "cc_agg_requests": len(agg),
        "offered": offered(agg[-1]) if agg else [],
        "panel_requests": len(llm.requests_for("agg")),
        "cc_ref_requests": len(llm.requests_for("cc-ref")),
        "last_user": [m for m in agg[-1]["messages"] if m.get("role") == "user"][-1:] if agg else [],
        "tool_results": tool_results(agg[-1]) if agg else [],
    }))  # fmt: skip
    llm.stop()


if __name__ == "__main__":
    main()
