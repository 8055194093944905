"""`moa-chat ask`: one headless turn of a ChatSession, for scripts and pipes."""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading
from pathlib import Path

from ..config import Config, Preset
from ..config.pricing import cost_label
from ..engine import CancelToken
from ..engine.panel import panel
from ..session import ChatSession, Notice, TurnResult
from ..session.attachments import AttachmentError, attach, read_attachment
from ..store import SessionStore, StoreError
from ..text.inert import inert, inert_json
from ..text.wording import plural
from .exit_codes import EXIT_FAILED, EXIT_INTERRUPTED, EXIT_OK, EXIT_READER_GONE, EXIT_USAGE
from .progress import Progress
from .stopping import Signalled, exit_status, signals_raise


def ask(config: Config, preset: Preset, args: argparse.Namespace, *, notice: str | None = None) -> int:
    prompt = sys.stdin.read() if args.prompt == "-" else args.prompt
    if not prompt.strip():
        print("moa-chat: error: the prompt is empty", file=sys.stderr)
        return EXIT_USAGE
    try:
        allowed = [Path(p) for p in getattr(args, "allow_path", None) or ()]
        hint = ", or allow one outside with --allow-path PATH"
        files = [
            read_attachment(path, base=Path.cwd(), allowed=allowed, hint=hint)
            for path in getattr(args, "attach", None) or ()
        ]
        content = attach(prompt, files) if files else prompt
    except AttachmentError as exc:
        print(f"moa-chat: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    # At a terminal (or with --stream) the reply streams; into a pipe or a file it is written once whole, so
    # a script never reads half a reply followed by a fresh one. Wherever a fresh reply can be shown as one,
    # a reply cut off after text arrived is asked for once more (ReplyRestarted).
    terminal, stream = _is_terminal(sys.stdout), bool(getattr(args, "stream", False))
    streamed = stream or terminal
    session = _session(config, preset, args, restart_cut_reply=bool(args.json) or terminal or not stream)
    preset = session.preset
    error, warning = session.preflight()
    if error:
        _close(session)
        print(f"moa-chat: error: {error}", file=sys.stderr)
        return EXIT_USAGE
    too_long = session.context.too_long(session.config, preset, content, files, ask=True)
    if too_long:
        _close(session)
        print(f"moa-chat: error: not sent: {too_long}", file=sys.stderr)
        return EXIT_USAGE
    over = session.over_budget(content, solo=bool(getattr(args, "solo", False)))
    if over:
        _close(session)
        print(f"moa-chat: error: not sent: {over}; raise the limit or pass a cheaper preset", file=sys.stderr)
        return EXIT_USAGE
    for line in (notice, warning):
        if line and not args.quiet:
            print(f"moa-chat: {line}", file=sys.stderr)
    if not args.quiet:
        refs = len(panel(preset))
        seats = "solo, no references" if args.solo else plural(refs, "reference")
        if preset.auto_layers and not args.solo:  # layers: auto runs as few layers as agree
            seats = f"up to {seats} in {preset.layers} layers"
        # Names from the config are made inert like every other line: a model name may hold escapes.
        print(inert(f"moa-chat: preset {preset.name} — {seats} → {preset.aggregator.label}"), file=sys.stderr)
        for file in files:
            cut = f", cut to the first {len(file.text):,}" if file.cut else ""
            print(inert(f"moa-chat: attached {file.path} ({file.characters:,} characters{cut})"), file=sys.stderr)
    cancel = CancelToken()

    def reader_gone() -> None:
        # Nobody reads the rest of the reply, so the turn stops: on a side thread, since cancelling closes the
        # stream the reporting thread is reading.
        threading.Thread(target=cancel.cancel, name="moa-ask-reader-gone", daemon=True).start()

    # --show-reasoning: the aggregator's thinking on stderr as it streams, faint at a terminal (never on stdout,
    # which stays the answer alone); --json carries it in the object instead.
    progress = Progress(
        sys.stderr,
        None if args.json else sys.stdout,
        args.quiet,
        reader_gone=reader_gone,
        whole=not args.json and not streamed,
        reasoning=bool(getattr(args, "show_reasoning", False)) and not args.json,
        dim=_is_terminal(sys.stderr),
    )
    try:
        session.start_mcp(report=lambda line: progress(Notice(line, "warning")))
        result = _send_interruptibly(session, content, progress, cancel, solo=bool(getattr(args, "solo", False)))
    except BaseException:
        _close(session)
        raise
    # The turn is over: its MCP servers begin to stop while the reply is written, and are waited for after it.
    session.begin_close()
    try:
        return _report(preset, result, session, progress, args)
    finally:
        _close(session)


def _report(
    preset: Preset, result: TurnResult, session: ChatSession, progress: Progress, args: argparse.Namespace
) -> int:
    """Write the turn's reply (the JSON object with --json) and its last line on stderr; the exit status."""
    if args.json:
        reply = _as_json(preset, result, progress.thoughts)
        sys.stdout.write(inert_json(reply, indent=2, ensure_ascii=False) + "\n")
    else:
        progress.end_line()  # the streamed reply (or what came of it) ends its line
    sys.stdout.flush()
    if progress.reader_went_away:
        return EXIT_READER_GONE  # quietly, as other tools end in a pipe whose reader left
    if result.status in ("failed", "cut_off"):
        print(f"moa-chat: error: {inert(result.error or '')}", file=sys.stderr)
        return EXIT_FAILED
    if result.warning:
        print(f"moa-chat: warning: the reply is whole but {result.warning}", file=sys.stderr)
    if result.status == "cancelled":
        return EXIT_INTERRUPTED
    if not args.quiet:
        saved = f" · session {session.id}" if session.id else ""
        reported = any(r.usage is not None for r in result.ledger.records)
        tokens = f"{result.usage.total_tokens:,} tokens" if reported else "tokens n/a"
        cost = result.ledger.cost()
        spent = f" · {cost_label(cost, complete=result.ledger.cost_complete())}" if cost is not None else ""
        print(
            f"moa-chat: done in {result.seconds:.1f}s · {tokens}{spent}{saved}",
            file=sys.stderr,
        )
    return EXIT_OK


def _close(session: ChatSession) -> None:
    """Stop the session's MCP servers (waiting for them to exit) and close its store: the process then ends
    without the interpreter's teardown (__main__.py), which would otherwise close the store."""
    session.close()
    if session.store is not None:
        session.store.close()


def _is_terminal(stream: object) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty()) if isatty is not None else False
    except (OSError, ValueError):  # closed, or not a real file
        return False


def _session(config: Config, preset: Preset, args: argparse.Namespace, *, restart_cut_reply: bool) -> ChatSession:
    """A new stored session, the one to continue (-c, --session), or none stored at all (--no-save).
    An explicit --preset wins over the preset a continued session last used."""
    wanted = getattr(args, "session", None)
    if args.no_save and (args.continue_ or wanted):
        raise StoreError("--no-save cannot continue a stored session: drop one of them")
    store = None if args.no_save else SessionStore()
    # ask never prompts: --yes allows changes, --allow-local reaching local addresses; the rest is denied.
    session = ChatSession(
        config,
        preset,
        allow_all=args.yes,
        allow_local=args.allow_local,
        store=store,
        system_prompt=getattr(args, "system", None),
        restart_cut_reply=restart_cut_reply,
    )
    if store is not None and (args.continue_ or wanted):
        latest = store.latest()
        if not wanted and latest is None:
            raise StoreError("there is no stored session to continue yet")
        session.open(wanted or (latest.id if latest else ""))
        if getattr(args, "preset", None) or getattr(args, "aggregator", None) or getattr(args, "reference", None):
            session.switch_preset(preset.name)  # given now: wins over what the session used
    return session


def _send_interruptibly(
    session: ChatSession, prompt: str, progress: Progress, cancel: CancelToken, *, solo: bool = False
) -> TurnResult:
    """Run the turn on a worker so Ctrl-C cancels it cleanly (streams closed) instead of killing a read."""
    box: dict[str, TurnResult] = {}
    # An Event, not Thread.join: a Ctrl-C that interrupts join() can leave the thread looking finished
    # (CPython 3.11), and the process would exit before the cancel had killed a running command.
    done = threading.Event()

    def work() -> None:
        try:
            box["result"] = session.send(prompt, observer=progress, cancel=cancel, solo=solo)
        finally:
            done.set()

    threading.Thread(target=work, name="moa-ask-turn", daemon=True).start()
    signalled: int | None = None
    # SIGTERM and SIGHUP (the terminal closed) end the turn as Ctrl-C does: cancelled, its commands and MCP
    # servers stopped, the stored turn marked interrupted; the default action would kill the process and
    # leave a running command orphaned.
    with signals_raise():
        try:
            while not done.wait(0.1):
                pass
        except (KeyboardInterrupt, Signalled) as stop:
            signalled = stop.number if isinstance(stop, Signalled) else None
            cancel.cancel()
            with contextlib.suppress(KeyboardInterrupt, Signalled):  # a second one: stop waiting
                done.wait(10)
    if signalled is not None:
        with contextlib.suppress(OSError):  # after SIGHUP the terminal may be gone
            progress.end_line()
            print(f"moa-chat: stopped by {signal.Signals(signalled).name}; the turn was cancelled", file=sys.stderr)
        raise SystemExit(exit_status(signalled))
    if "result" not in box:  # something ignored the cancel; the worker is a daemon and dies with us
        progress.end_line()
        print("moa-chat: cancelled (a tool or request did not stop in time)", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    return box["result"]


def _as_json(preset: Preset, result: TurnResult, thoughts: list[str]) -> dict[str, object]:
    """The turn as one object; `reasoning` (the aggregator's, its rounds' thoughts joined) and each reference's
    are null when the model sent none."""
    references = [
        {
            "index": r.index,
            "layer": r.record.layer,
            "label": r.label,
            "status": r.status,
            "text": r.text,
            "error": r.error,
            "seconds": r.seconds,
            "first_token_seconds": r.first_token_seconds,
            "usage": r.usage.as_dict() if r.usage else None,
            "reasoning": r.reasoning or None,
        }
        for r in result.references
    ]
    return {
        "preset": preset.name,
        "aggregator": preset.aggregator.label,
        "status": result.status,
        "reply": result.text,
        "reasoning": "\n\n".join(thoughts) or None,
        "error": result.error,
        "seconds": result.seconds,
        "solo": result.solo,
        "references": references,
        "reference_order": result.reference_order,
        "layers_run": result.layers_run,
        "layers_reason": result.layers_reason,
        "usage": result.ledger.as_json(),
    }
