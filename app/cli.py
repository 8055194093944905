"""The `moa-chat` command: the TUI by default, `ask` for one headless turn, `presets` to list them.

Exit status: 0 success, 1 the turn failed, 2 a usage or configuration error (one line on stderr),
130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from pathlib import Path
from typing import Any, ClassVar, TextIO

from . import __version__
from .config import Config, ConfigError, Preset, load_config
from .events import (
    AggregatorStarted,
    Event,
    Notice,
    ReferenceFinished,
    ReferenceStarted,
    ReplyDelta,
    ToolCallEvent,
)
from .providers import has_key
from .startup import choose_start, preflight
from .tools import Workspace, tools_for
from .tools.approval import ApprovalPolicy
from .tools.mcp_bridge import McpHub
from .tools.registry import summarize_arguments
from .turn import Turn, TurnResult

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        type=Path,
        help="config file to use (default: config.yaml in $MOA_CHAT_HOME or the user config folder)",
    )
    common.add_argument("--preset", metavar="NAME", help="MoA preset to use (see `moa-chat presets`)")

    parser = argparse.ArgumentParser(
        prog="moa-chat",
        parents=[common],
        description="Terminal chat with a Mixture-of-Agents panel: references advise, one aggregator acts.",
    )
    parser.add_argument("--version", action="version", version=f"moa-chat {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    ask = sub.add_parser("ask", parents=[common], help="run one MoA turn without the TUI and print the reply")
    ask.add_argument("prompt", metavar="PROMPT", help="the prompt; - reads it from standard input")
    ask.add_argument("--json", action="store_true", help="print one JSON object with the reply, references and usage")
    ask.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    ask.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="allow tools that change something (write_file, run_command, ...); without it they are "
        "denied, since ask never prompts",
    )
    sub.add_parser("presets", parents=[common], help="list the presets, their models, and the default")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        config = load_config(args.config)
        if args.command == "presets":
            return list_presets(config, sys.stdout)
        choice = choose_start(config, args.preset)
        if args.command == "ask":
            return ask(config, choice.preset, args, notice=choice.notice)
    except ConfigError as exc:
        print(f"moa-chat: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    from .tui.app import run_app

    return run_app(config, choice.preset, notice=choice.notice)


# --------------------------------------------------------------------------- presets


def list_presets(config: Config, out: TextIO) -> int:
    default = choose_start(config).preset.name
    width = max(len(name) for name in config.presets)
    for name in sorted(config.presets):
        preset = config.presets[name]
        mark = "*" if name == default else " "
        suffix = "  (default)" if name == default else ""
        out.write(f"{mark} {name:<{width}}  {preset.description}{suffix}\n")
        refs = ", ".join(slot.label for slot in preset.references)
        out.write(f"  {'':<{width}}  references: {refs}\n")
        out.write(f"  {'':<{width}}  aggregator: {preset.aggregator.label}\n")
        missing = sorted(
            config.providers[p].api_key_env or p
            for p in preset.providers
            if p in config.providers and not has_key(p, config)
        )
        if missing:
            out.write(f"  {'':<{width}}  needs: {', '.join(missing)} (not set)\n")
    return EXIT_OK


# --------------------------------------------------------------------------- ask


class _Progress:
    """Reference progress and notes on stderr; the reply itself goes to stdout as it streams."""

    _GLYPH: ClassVar[dict[str, str]] = {"ok": "✓", "failed": "✗", "timeout": "⏱", "cancelled": "–"}

    def __init__(self, err: TextIO, out: TextIO | None, quiet: bool) -> None:
        self.err, self.out, self.quiet = err, out, quiet
        self._lock = threading.Lock()
        self._wrote_reply = False
        self._any_reply = False
        self._after_tools = False

    def __call__(self, event: Event) -> None:
        with self._lock:
            if isinstance(event, ToolCallEvent):
                self._after_tools = True
            if isinstance(event, ReplyDelta):
                if self.out is not None:
                    if self._after_tools and self._any_reply:
                        # A blank line between the text before the tool calls and the text after them; the
                        # first newline may already be out, written to end the line before a progress line.
                        self.out.write("\n\n" if self._wrote_reply else "\n")
                    self._after_tools = False
                    self._any_reply = True
                    self.out.write(event.text)
                    self.out.flush()
                    self._wrote_reply = True
                return
            line = self._describe(event)
            if line and not self.quiet:
                if self._wrote_reply and self.out is not None:
                    self.out.write("\n")
                    self.out.flush()
                    self._wrote_reply = False
                self.err.write(line + "\n")
                self.err.flush()

    def _describe(self, event: Event) -> str | None:
        if isinstance(event, ReferenceStarted):
            return f"  … {event.label}"
        if isinstance(event, ReferenceFinished):
            glyph = self._GLYPH.get(event.status, "?")
            detail = f"{event.seconds:.1f}s"
            if event.usage:
                detail += f", {event.usage.completion_tokens} tokens"
            if event.error:
                detail += f" — {event.error}"
            return f"  {glyph} {event.label} ({detail})"
        if isinstance(event, AggregatorStarted):
            if event.guidance_reused:
                return None
            return f"  → {event.label} writing ({event.references_ok}/{event.references_total} references answered)"
        if isinstance(event, ToolCallEvent) and event.status in ("done", "failed", "denied", "cancelled"):
            took = f" {event.seconds:.1f}s" if event.seconds else ""
            why = ""
            if event.status == "denied":
                why = " (needs approval: run with --yes to allow)"
            elif event.status == "failed" and event.result:
                why = f": {event.result.splitlines()[0][:160]}"
            return f"  ⚙ {event.name}({summarize_arguments(event.arguments)}) {event.status}{took}{why}"
        if isinstance(event, Notice):
            return f"  ! {event.text}"
        return None


def ask(config: Config, preset: Preset, args: argparse.Namespace, *, notice: str | None = None) -> int:
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        print("moa-chat: error: the prompt is empty", file=sys.stderr)
        return EXIT_USAGE
    error, warning = preflight(config, preset)
    if error:
        print(f"moa-chat: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    for line in (notice, warning):
        if line and not args.quiet:
            print(f"moa-chat: {line}", file=sys.stderr)
    if not args.quiet:
        print(
            f"moa-chat: preset {preset.name} — {len(preset.references)} references → {preset.aggregator.label}",
            file=sys.stderr,
        )
    progress = _Progress(sys.stderr, None if args.json else sys.stdout, args.quiet)
    mcp = McpHub(config.mcp_servers).start(report=lambda line: progress(Notice(line, "warning")))
    try:
        tools, warnings = tools_for(config, preset, Workspace(Path.cwd()), mcp)
        for line in warnings:
            progress(Notice(line, "warning"))
        turn = Turn(config, preset, observer=progress, tools=tools, approver=ApprovalPolicy(None, allow_all=args.yes))
        result = _run_interruptibly(turn, [{"role": "user", "content": prompt}])
    finally:
        mcp.close()
    if args.json:
        json.dump(_as_json(preset, result), sys.stdout, indent=2, ensure_ascii=False)
        sys.stdout.write("\n")
    elif result.text and not result.text.endswith("\n"):
        sys.stdout.write("\n")
    sys.stdout.flush()
    if result.status == "failed":
        print(f"moa-chat: error: {result.error}", file=sys.stderr)
        return EXIT_FAILED
    if result.status == "cancelled":
        return EXIT_INTERRUPTED
    if not args.quiet:
        print(f"moa-chat: done in {result.seconds:.1f}s · {result.usage.total_tokens:,} tokens", file=sys.stderr)
    return EXIT_OK


def _run_interruptibly(turn: Turn, messages: list[dict[str, Any]]) -> TurnResult:
    """Run the turn on a worker so Ctrl-C cancels it cleanly (streams closed) instead of killing a read."""
    box: dict[str, TurnResult] = {}
    worker = threading.Thread(target=lambda: box.setdefault("result", turn.run(messages)), daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.1)
    except KeyboardInterrupt:
        turn.cancel.cancel()
        with contextlib.suppress(KeyboardInterrupt):  # a second Ctrl-C: stop waiting
            worker.join(5)
    if "result" not in box:  # something ignored the cancel; the worker is a daemon and dies with us
        print("moa-chat: cancelled (a tool or request did not stop in time)", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    return box["result"]


def _as_json(preset: Preset, result: TurnResult) -> dict[str, Any]:
    references = [
        {
            "label": r.label,
            "status": r.status,
            "text": r.text,
            "error": r.error,
            "seconds": r.seconds,
            "first_token_seconds": r.first_token_seconds,
            "usage": r.usage.as_dict() if r.usage else None,
        }
        for r in result.references
    ]
    reference_usage = sum((r.usage.total_tokens for r in result.references if r.usage), 0)
    return {
        "preset": preset.name,
        "aggregator": preset.aggregator.label,
        "status": result.status,
        "reply": result.text,
        "error": result.error,
        "seconds": result.seconds,
        "references": references,
        "usage": {
            **result.usage.as_dict(),
            "references_total_tokens": reference_usage,
            "aggregator_total_tokens": result.usage.total_tokens - reference_usage,
        },
    }


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
