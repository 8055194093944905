"""What the `moa-chat` command does with its parsed command line: the chat when no subcommand is named, else
the subcommand, each with its exit status."""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from ..config import Config, ConfigError, Preset, load_config
from ..config.adhoc import adhoc_preset, with_preset
from ..providers import choose_start
from .exit_codes import EXIT_USAGE
from .parser import build_parser
from .presets import list_presets

if TYPE_CHECKING:
    from ..tui.app import MoAChatApp


def main(argv: list[str] | None = None) -> int:
    return run(build_parser().parse_args(argv))


def run(args: argparse.Namespace) -> int:
    """Run the command `args` names (the chat when none); its exit status."""
    if args.command is None:
        gc.disable()  # the chat starts with the garbage collector paused (__main__.py); its first frame resumes it
    else:
        gc.enable()
    if args.command == "doctor":
        return _doctor(args.config)
    if args.command == "eval":
        from .eval_command import run_eval

        return run_eval(args)
    if args.command in ("sessions", "export"):
        # The store alone: a config with a typo never locks anyone out of what was said.
        return _stored_sessions(args)
    try:
        config = load_config(args.config)
        if args.command == "presets":
            return list_presets(config, sys.stdout, as_json=args.json)
    except ConfigError as exc:
        return _usage_error(exc)
    # Only what follows talks to providers or the store: their imports (the openai SDK above all, half a
    # second) are paid here, so `presets` and `--help` start at once.
    from ..store import StoreError

    try:
        choice = choose_start(config, args.preset)
        if args.aggregator or args.reference:
            adhoc = adhoc_preset(config, choice.preset, aggregator=args.aggregator, references=args.reference or ())
            config = with_preset(config, adhoc)
            choice = dataclasses.replace(choice, preset=adhoc)
        if args.command == "serve":
            from .serve import serve

            return serve(args)
        if args.command == "api":
            from .api_command import run_api

            return run_api(config, choice.preset.name, args)
        if args.command == "mcp":
            from .mcp_command import run_mcp

            return run_mcp(config, choice.preset.name, args)
        if args.command == "ask":
            from .ask import ask

            return ask(config, choice.preset, args, notice=choice.notice)
        app = _tui_app(config, args, choice.preset, choice.notice)
    except (ConfigError, StoreError) as exc:
        return _usage_error(exc)
    if not _has_a_terminal():  # checked after the config and the session: their errors say more
        return _usage_error("the chat needs a terminal: stdin and stdout must be one; in a script, use `moa-chat ask`")
    from ..tui.app import run_app

    return run_app(app)


def _has_a_terminal() -> bool:
    """Whether the chat has a screen and a keyboard: a terminal, or the browser's (textual-serve's web driver)."""
    return bool(os.environ.get("TEXTUAL_DRIVER")) or (sys.stdin.isatty() and sys.stdout.isatty())


def _stored_sessions(args: argparse.Namespace) -> int:
    """`sessions` and `export`: they read the store and need no config."""
    from ..store import SessionStore, StoreError
    from .session_commands import export_session, list_sessions

    if getattr(args, "session", None):
        where = "give the id as export's argument" if args.command == "export" else "it lists every session"
        return _usage_error(f"--session is for the chat and `ask`; `{args.command}` does not take it ({where})")
    try:
        if args.command == "sessions":
            return list_sessions(SessionStore(), sys.stdout, as_json=args.json, search=args.search)
        return export_session(SessionStore(), args.id, args.format, args.output)
    except StoreError as exc:
        return _usage_error(exc)


def _doctor(config_path: Path | None) -> int:
    """`moa-chat doctor` loads the config itself: a broken one is its first finding, not a usage error."""
    from .doctor import doctor

    try:
        return doctor(config_path, sys.stdout)
    except ConfigError as exc:  # after the config check (choose_start's unknown preset): as for every command
        return _usage_error(exc)


def _usage_error(exc: Exception | str) -> int:
    print(f"moa-chat: error: {exc}", file=sys.stderr)
    return EXIT_USAGE


def _tui_app(config: Config, args: argparse.Namespace, preset: Preset, notice: str | None) -> MoAChatApp:
    """The chat app and its session: stored unless the store cannot be opened (then it says so and keeps
    going), continuing --session or --resume (those must work, or moa-chat stops with the reason). The
    session is built by the app, with the app's approver (the approval dialog)."""
    from ..session import ChatSession
    from ..store import SessionStore, StoreError
    from ..tools import Approver
    from ..tui.app import MoAChatApp

    wanted = args.session or args.resume
    try:
        store: SessionStore | None = SessionStore()
    except StoreError as exc:
        if wanted:
            raise
        store = None
        notice = "\n".join(filter(None, [notice, f"Conversations are not being saved: {exc}"]))

    def session(approver: Approver, *, restart_cut_reply: bool) -> ChatSession:
        chat_session = ChatSession(config, preset, approver=approver, store=store, restart_cut_reply=restart_cut_reply)
        if store is not None and wanted:
            latest = store.latest() if not args.session else None
            if not args.session and latest is None:
                raise StoreError("there is no stored session to resume yet")
            chat_session.open(args.session or (latest.id if latest else ""))
            if args.preset or args.aggregator or args.reference:  # given now: wins over what the session used
                chat_session.switch_preset(preset.name)
        return chat_session

    return MoAChatApp(config, preset, notice=notice, session=session, freeze_heap=True)
