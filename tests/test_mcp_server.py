"""`moa-chat mcp` as a real process, through the `mcp` client SDK (stdio and streamable HTTP) and the MCP
Inspector's CLI: consult_panel's synthesis, structured content and progress, images in its context, a cancel
that closes the panel's streams, list_presets, and the token over HTTP."""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from api_helpers import TOKEN, WAIT, configure
from image_helpers import b64, png
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from moa_chat.providers.loopback_server import Reply
from node_clients import node_bin


def stdio(home: Path, *args: str) -> StdioServerParameters:
    env = {**os.environ, "MOA_CHAT_HOME": str(home), "MOA_CHAT_DEMO_PACE": "0"}
    return StdioServerParameters(command=sys.executable, args=["-m", "moa_chat", "mcp", *args], env=env, cwd=str(home))


async def consult(home: Path, arguments: dict[str, Any], progress: list[tuple[float, float | None, str | None]]) -> Any:
    async with stdio_client(stdio(home)) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def heard(done: float, total: float | None, message: str | None) -> None:
            progress.append((done, total, message))

        return await session.call_tool("consult_panel", arguments, progress_callback=heard)


def test_consult_panel_returns_the_synthesis_each_reference_and_progress(home, llm_server):
    configure(home, llm_server)
    llm_server.script("agg", Reply(text="Cache the build outputs."))
    llm_server.script(
        "ref-b",
        Reply(text="Profile it first.", usage={"prompt_tokens": 40, "completion_tokens": 4, "total_tokens": 44}),
    )
    progress: list[tuple[float, float | None, str | None]] = []
    result = anyio.run(
        consult, home, {"question": "Why is the build slow?", "context": "make takes 10 minutes"}, progress
    )
    assert not result.is_error
    assert [block.text for block in result.content] == ["Cache the build outputs."]
    report = result.structured_content
    assert report["preset"] == "wire" and report["synthesis"] == "Cache the build outputs."
    by_model = {ref["model"]: ref for ref in report["references"]}
    assert set(by_model) == {"wire:ref-a", "wire:ref-b", "wire:ref-c"}
    assert by_model["wire:ref-b"]["answer"] == "Profile it first." and by_model["wire:ref-b"]["status"] == "ok"
    assert by_model["wire:ref-b"]["tokens"]["completion_tokens"] == 4 and by_model["wire:ref-b"]["seconds"] >= 0
    assert [done for done, _, _ in progress][:3] == [1, 2, 3] and all(total == 3 for _, total, _ in progress)
    assert progress[2][2].startswith("3 of 3 answered")
    agg = llm_server.requests_for("agg")[0].body
    assert "tools" not in agg  # the panel is never given tools in this mode
    question = next(m["content"] for m in agg["messages"] if m["role"] == "user")
    assert question == "Why is the build slow?\n\n<context>\nmake takes 10 minutes\n</context>"


def test_image_blocks_in_the_context_reach_the_panel(home, llm_server):
    configure(home, llm_server)
    picture = png(320, 200)
    context = [
        {"type": "text", "text": "the failing page"},
        {"type": "image", "data": b64(picture), "mimeType": "image/png"},
    ]
    result = anyio.run(consult, home, {"question": "What is wrong here?", "context": context}, [])
    assert not result.is_error
    parts = next(m["content"] for m in llm_server.requests_for("ref-a")[0].body["messages"] if m["role"] == "user")
    assert {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{b64(picture)}"}} in parts
    bad = anyio.run(
        consult,
        home,
        {"question": "?", "context": [{"type": "image", "data": b64(b"nope"), "mimeType": "image/png"}]},
        [],
    )
    assert bad.is_error and "not a PNG, JPEG, GIF or WebP image" in bad.content[0].text


def test_cancelling_the_request_cancels_the_turn(home, llm_server):
    configure(home, llm_server)
    resume = threading.Event()
    llm_server.script("agg", Reply(text="one two three", pause_after=1, pause=120, resume=resume))

    async def go() -> None:
        async with stdio_client(stdio(home)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            async with anyio.create_task_group() as group:
                group.start_soon(session.call_tool, "consult_panel", {"question": "slow build?"})
                request = await anyio.to_thread.run_sync(llm_server.wait_for_request, "agg", WAIT)
                await anyio.to_thread.run_sync(request.stalled.wait, WAIT)
                group.cancel_scope.cancel()  # the client gives up: notifications/cancelled
            ended = await anyio.to_thread.run_sync(request.finished.wait, WAIT)
            assert ended and request.disconnected  # the panel's stream was closed, not waited out

    try:
        anyio.run(go)
    finally:
        resume.set()


def test_list_presets_names_each_panel_and_why_one_cannot_run(home, llm_server):
    configure(home, llm_server)

    async def go() -> Any:
        async with stdio_client(stdio(home)) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = await session.list_tools()
            assert [tool.name for tool in tools.tools] == ["consult_panel", "list_presets"]
            return await session.call_tool("list_presets", {})

    result = anyio.run(go)
    rows = {row["name"]: row for row in result.structured_content["presets"]}
    assert rows["wire"]["default"] and rows["wire"]["runnable"] and rows["wire"]["references"][0] == "wire:ref-a"
    assert not rows["openai"]["runnable"] and "OPENAI_API_KEY" in rows["openai"]["why_not"]
    assert "wire (default): Three references and an aggregator on the test server" in result.content[0].text


def start_http(home: Path) -> tuple[subprocess.Popen[str], str]:
    env = {**os.environ, "MOA_CHAT_API_KEY": TOKEN}
    proc = subprocess.Popen(
        [sys.executable, "-m", "moa_chat", "mcp", "--port", "0"],
        cwd=home,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout or ()], daemon=True).start()
    while True:
        line = lines.get(timeout=WAIT)
        if match := re.search(r"serving on (http://\S+/mcp)", line):
            return proc, match.group(1)


def test_streamable_http_needs_the_token(home, llm_server):
    configure(home, llm_server)
    llm_server.script("agg", Reply(text="over HTTP"))
    proc, url = start_http(home)
    try:
        request = urllib.request.Request(url, b"{}", {"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=30)
        assert refused.value.code == 401

        async def go() -> Any:
            headers = {"Authorization": f"Bearer {TOKEN}"}
            async with (
                httpx2.AsyncClient(headers=headers, timeout=60) as http,
                streamable_http_client(url, http_client=http) as (read, write),
                ClientSession(read, write) as session,
            ):
                await session.initialize()
                return await session.call_tool("consult_panel", {"question": "hello?"})

        result = anyio.run(go)
        assert result.content[0].text == "over HTTP"
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_mcp_inspectors_cli_lists_and_calls_the_tools(home, llm_server):
    inspector = node_bin("mcp-inspector")
    configure(home, llm_server)
    llm_server.script("agg", Reply(text="from the inspector"))
    server = [sys.executable, "-m", "moa_chat", "mcp"]
    env = {**os.environ, "MOA_CHAT_DEMO_PACE": "0"}
    listed = subprocess.run([str(inspector), "--cli", *server, "--method", "tools/list"], cwd=home, env=env,
                            capture_output=True, text=True, timeout=180)  # fmt: skip
    assert listed.returncode == 0, listed.stderr
    assert [tool["name"] for tool in json.loads(listed.stdout)["tools"]] == ["consult_panel", "list_presets"]
    called = subprocess.run(
        [str(inspector), "--cli", *server, "--method", "tools/call", "--tool-name", "consult_panel",
         "--tool-arg", "question=Why is the build slow?"],
        cwd=home, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert called.returncode == 0, called.stderr
    answer = json.loads(called.stdout)
    assert answer["content"] == [{"type": "text", "text": "from the inspector"}]
    assert len(answer["structuredContent"]["references"]) == 3
    print(called.stdout)  # what the Inspector printed, for the record
