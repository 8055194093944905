"""`ContextKeeper`: what a session keeps of its models' context windows (docs/context.md).

The windows and token counts of its models, with what is learned of them (a window an overflow error named, a
token calibration) kept in the session store, or for this process where there is none; and its conversation's
summary once compacted (session/compaction.py), stored with the session so that a reopened session sends what
it sent before.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Sequence

from ..config import Config, Preset
from ..engine import ReferenceFinished, TurnEnv
from ..engine.budget import ContextBudget
from ..engine.guidance import guidance_message
from ..llm.facts import PROCESS_FACTS
from ..llm.messages import Message, ToolSpec, user
from ..llm.tokens import TokenCounter
from ..llm.windows import WindowFinder
from ..store import SessionStore, StoreError
from .attachments import Attachment
from .compaction import CompactionFailed, Compactor, Summary, models_view, slots_of

Stored = tuple[str | None, int | None]  # the stored session and its head, where the conversation is stored


class ContextKeeper:
    def __init__(self, store: SessionStore | None) -> None:
        self._store = store
        self._facts = store.model_facts if store is not None else PROCESS_FACTS
        self._counter = TokenCounter(self._facts)
        self._finder: WindowFinder | None = None
        # What the models are sent in place of the conversation's earlier exchanges, once it was compacted.
        self.summary: Summary | None = None
        self._guidance: int | None = None  # what the last turn's reference answers took (the aggregator's count)
        self._compacting = threading.Lock()  # two compactions of one conversation never run at once

    # ------------------------------------------------------------------ windows

    def finder(self, config: Config) -> WindowFinder:
        """The windows of `config`'s models (a session's config changes with a one-off panel)."""
        if self._finder is None or self._finder.config is not config:
            self._finder = WindowFinder(config, self._facts)
        return self._finder

    def budget(self, config: Config, preset: Preset) -> ContextBudget:
        """A turn's budget on `preset`: the windows, resolved as the turn first needs them (on its thread)."""
        return ContextBudget(self.finder(config), self._counter, preset)

    def too_long(
        self, config: Config, preset: Preset, content: str, files: Sequence[Attachment] = (), *, ask: bool = False
    ) -> str | None:
        """Why a prompt of `content` cannot be sent even alone, to one of `preset`'s models whose window is known
        (naming the attached files and their sizes), or None. Asks no provider unless `ask` (a window it has not
        told yet counts as unknown): without, fit for the UI's thread."""
        finder = self.finder(config)
        for slot in slots_of(preset):
            window = (finder.window(slot) if ask else finder.known(slot)).tokens
            if window is None:
                continue
            reserve = preset.reserve_for(slot)
            tokens = self._counter.count_messages(slot.provider, slot.model, [user(content)]).tokens
            if tokens <= window - reserve:
                continue
            sizes = ", ".join(
                f"{file.path}: about {self._counter.count_text(slot.provider, slot.model, file.text).tokens:,}"
                for file in files
            )
            return (
                f"the prompt is about {tokens:,} tokens{f' ({sizes})' if sizes else ''}, more than {slot.label} can "
                f"read: its context window is {window:,} tokens, and {reserve:,} of them are kept for its answer"
            )
        return None

    # ------------------------------------------------------------------ the summary

    def view(self, messages: Sequence[Message]) -> list[Message]:
        """The conversation as the models are sent it (the summary in place of what it stands for)."""
        return models_view(messages, self.summary)

    def reload(self, session_id: str | None, head_id: int | None) -> None:
        """The summary of the stored conversation now shown (another session, another version of it)."""
        self.summary = None
        if self._store is None or session_id is None:
            return
        with contextlib.suppress(StoreError, sqlite3.Error):
            path = [message.id for message in self._store.path(session_id, head_id)]
            found = self._store.summaries.latest_on(session_id, path)
            if found is not None:
                kept, covers = found
                self.summary = Summary(
                    kept.text, covers, kept.exchanges, kept.tokens_before, kept.tokens_after, kept.model
                )

    def forget(self) -> None:
        self.summary, self._guidance = None, None

    def note_answers(self, budget: ContextBudget | None, preset: Preset, answers: Sequence[ReferenceFinished]) -> None:
        """What a turn's reference answers took in the aggregator's request (the guidance, its words around them
        too): the room the next turn keeps them."""
        shown = [answer for answer in answers if answer.record.layer == max(a.record.layer for a in answers)]
        if budget is not None and shown:
            self._guidance = budget.message(preset.aggregator, guidance_message(shown, anonymous=preset.anonymous))

    def compact_if_due(
        self,
        env: TurnEnv,
        preset: Preset,
        messages: Sequence[Message],
        stored: Stored,
        *,
        tools: Sequence[ToolSpec] | None = None,
        solo: bool = False,
    ) -> None:
        """Before a turn (its prompt the last of `messages`): compact the conversation when it would fill more
        than `compact_at` of the tightest window. A compaction that fails leaves it as it was (and says so)."""
        if env.budget is None:
            return
        compactor = Compactor(env, env.budget, preset)
        if compactor.due(self.view(messages), self._guidance if not solo else 0, tools) is None:
            return
        with self._compacting, contextlib.suppress(CompactionFailed):
            self._compact(compactor, messages, stored, pending=True)

    def compact(self, env: TurnEnv, preset: Preset, messages: Sequence[Message], stored: Stored) -> Summary | None:
        """Compact now (the user asked): the new summary, or None when no exchange is left to summarise. Raises
        CompactionFailed when it could not be written, or another compaction of this conversation is running."""
        if env.budget is None:
            return None
        if not self._compacting.acquire(blocking=False):
            raise CompactionFailed("this conversation is being compacted already")
        try:
            return self._compact(Compactor(env, env.budget, preset), messages, stored, pending=False)
        finally:
            self._compacting.release()

    def _compact(
        self, compactor: Compactor, messages: Sequence[Message], stored: Stored, *, pending: bool
    ) -> Summary | None:
        summary = compactor.compact(messages, self.summary, pending=pending)
        if summary is None:
            return None
        self.summary = summary
        session_id, head_id = stored
        if self._store is not None and session_id is not None:
            with contextlib.suppress(StoreError, sqlite3.Error):  # kept for this process all the same
                path = self._store.path(session_id, head_id)
                if len(path) >= summary.covers > 0:
                    # Made before the pending prompt (the turn's), or after the conversation (Compact now).
                    after = path[-2].id if pending and len(path) > 1 else path[-1].id
                    self._store.summaries.add(
                        session_id,
                        path[summary.covers - 1].id,
                        summary.text,
                        after_message_id=after,
                        exchanges=summary.exchanges,
                        tokens_before=summary.tokens_before,
                        tokens_after=summary.tokens_after,
                        model=summary.model,
                    )
        return summary
