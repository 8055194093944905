"""The `moa-chat` command. With no subcommand it opens the TUI; `ask` runs one headless turn; `presets`,
`sessions` and `export` print what is configured and what was said; `serve` runs the chat in a browser.

Exit status: 0 success, 1 the turn failed, 2 a usage, configuration or session-store error (one line on
stderr), 130 interrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .. import __version__
from ..config import Config, ConfigError, Preset, load_config
from ..config.adhoc import adhoc_preset, with_preset
from ..providers import choose_start
from .api_command import add_arguments as add_api_arguments
from .eval_command import add_arguments as add_eval_arguments
from .exit_codes import EXIT_USAGE
from .presets import list_presets
from .serve import add_arguments as add_serve_arguments

if TYPE_CHECKING:
    from ..tui.app import MoAChatApp


def _common(*, under_a_command: bool) -> argparse.ArgumentParser:
    """Options that work before and after the subcommand. Under a subcommand they default to "not given",
    so `moa-chat --preset X ask` keeps the X the top level parsed."""
    default = argparse.SUPPRESS if under_a_command else None
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="PATH",
        type=Path,
        default=default,
        help="config file to use (default: config.yaml in $MOA_CHAT_HOME or the user config folder)",
    )
    common.add_argument("--preset", metavar="NAME", default=default, help="MoA preset to use (see `moa-chat presets`)")
    common.add_argument(
        "--aggregator",
        metavar="PROVIDER:MODEL",
        default=default,
        help="use this aggregator instead of the preset's (a one-off preset named `custom`)",
    )
    common.add_argument(
        "--reference",
        metavar="PROVIDER:MODEL",
        action="append",
        default=default,
        help="a reference model instead of the preset's; repeat for several",
    )
    common.add_argument(
        "--session",
        metavar="ID",
        default=default,
        help="continue a stored session: its id, or the start of one (see `moa-chat sessions`)",
    )
    return common


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="moa-chat",
        parents=[_common(under_a_command=False)],
        description="Terminal chat with a Mixture-of-Agents panel: references advise, one aggregator acts. "
        "With no COMMAND it opens the chat (the TUI).",
    )
    parser.add_argument("--version", action="version", version=f"moa-chat {__version__}")
    parser.add_argument("--resume", action="store_true", help="open the chat on the latest stored session")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    common = _common(under_a_command=True)

    ask_ = sub.add_parser("ask", parents=[common], help="run one MoA turn without the TUI and print the reply")
    ask_.add_argument("prompt", metavar="PROMPT", help="the prompt; - reads it from standard input")
    ask_.add_argument("--json", action="store_true", help="print one JSON object with the reply, references and usage")
    ask_.add_argument(
        "--stream",
        action="store_true",
        help="stream the reply into a pipe or file too (by default it is written there once whole)",
    )
    ask_.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    ask_.add_argument(
        "--show-reasoning",
        action="store_true",
        help="print a reasoning model's thinking on stderr as it streams (faint at a terminal); --json has it anyway",
    )
    ask_.add_argument(
        "-y",
        "--yes",
        action="store_true",
        help="allow tools that change something (write_file, run_command, ...); without it they are "
        "denied, since ask never prompts",
    )
    ask_.add_argument(
        "--allow-local",
        action="store_true",
        help="let fetch_url reach this machine and its network (localhost, the LAN, cloud metadata) without "
        "asking; --yes does not allow that",
    )
    ask_.add_argument("--solo", action="store_true", help="ask the aggregator alone, no references (a quick question)")
    ask_.add_argument("--system", metavar="TEXT", help="the system prompt for this turn (over the config's)")
    ask_.add_argument(
        "-a",
        "--attach",
        metavar="FILE",
        action="append",
        help="attach a text file as context (repeatable; each is capped at 50,000 characters)",
    )
    ask_.add_argument(
        "--allow-path",
        metavar="PATH",
        action="append",
        help="let -a attach a file outside the working folder: PATH, or any file in the folder PATH (repeatable)",
    )
    ask_.add_argument("-c", "--continue", dest="continue_", action="store_true", help="continue the latest session")
    ask_.add_argument("--no-save", action="store_true", help="store nothing of this turn")

    presets = sub.add_parser(
        "presets", parents=[common], help="list the presets, their models, what they need, and the default"
    )
    presets.add_argument("--json", action="store_true", help="one JSON array, for scripts")
    sessions = sub.add_parser("sessions", parents=[common], help="list stored sessions, newest first")
    sessions.add_argument("--json", action="store_true", help="print a JSON array of sessions")
    sessions.add_argument("--search", metavar="TEXT", help="only sessions whose title or messages match")
    export = sub.add_parser("export", parents=[common], help="print a stored session as Markdown or JSON")
    export.add_argument("id", metavar="ID", help="the session's id, or the start of one")
    export.add_argument("--format", choices=("md", "json"), default="md", help="md (default) or json")
    export.add_argument("-o", "--output", metavar="FILE", type=Path, help="write to FILE instead of stdout")
    sub.add_parser(
        "doctor", parents=[common], help="check the config, keys, endpoints, the local model and the data folder"
    )
    add_serve_arguments(sub.add_parser("serve", parents=[common], help="run the chat in a web browser (see --host)"))
    add_api_arguments(sub.add_parser("api", parents=[common], help="serve the presets as an OpenAI-compatible API"))
    add_eval_arguments(sub.add_parser("eval", help="measure presets against their own members and baselines on tasks"))
    return parser


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
