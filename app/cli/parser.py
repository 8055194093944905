"""The `moa-chat` command line: the options before and after a subcommand, and each subcommand's own."""

from __future__ import annotations

import argparse
from pathlib import Path

from .. import __version__
from .api_command import add_arguments as add_api_arguments
from .eval_command import add_arguments as add_eval_arguments
from .mcp_command import add_arguments as add_mcp_arguments
from .serve import add_arguments as add_serve_arguments


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
    add_mcp_arguments(
        sub.add_parser("mcp", parents=[common], help="serve the panel as MCP tools (consult_panel) on stdio or HTTP")
    )
    add_eval_arguments(sub.add_parser("eval", help="measure presets against their own members and baselines on tasks"))
    return parser
