"""The `moa-chat` command: the TUI by default, `ask` for one headless turn, `presets` to list them.

Exit status: 0 success, 1 the turn failed, 2 a usage or configuration error (one line on stderr),
130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .. import __version__
from ..config import ConfigError, load_config
from ..providers import choose_start
from .ask import ask
from .exit_codes import EXIT_USAGE
from .presets import list_presets


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
    from ..tui.app import run_app

    return run_app(config, choice.preset, notice=choice.notice)
