"""What an agent puts in its prompt for its next turn, within a token budget.

Three sections: the long-term memories most relevant to the latest message, the
procedures that match it, and the session window (newest messages). The budget is
split by configurable shares; each section first fills its own share in rank order
(the window from its newest message back), then what the sections left unused is
handed out again in the same order, so a short conversation leaves room for more
memories and a quiet memory leaves room for more conversation. The text is the
seeds' ``to_prompt_context``: each memory with its date and category; a procedure
with its numbered steps. Every token is counted with the service's tokenizer, and
the assembled text is counted again as a whole, so it never exceeds the budget.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.codec import to_iso
from engine.ports import TokenCounter
from engine.procedures import steps_of
from engine.records import Memory
from engine.session_records import Message

WINDOW, MEMORIES, PROCEDURES = "window", "memories", "procedures"
HEADINGS = {
    MEMORIES: "Relevant memories:",
    PROCEDURES: "Procedures:",
    WINDOW: "Conversation so far:",
}


@dataclass(frozen=True, slots=True)
class Shares:
    window: float
    memories: float
    procedures: float

    def budgets(self, total: int) -> dict[str, int]:
        whole = self.window + self.memories + self.procedures
        return {
            WINDOW: int(total * (self.window / whole)),
            MEMORIES: int(total * (self.memories / whole)),
            PROCEDURES: int(total * (self.procedures / whole)),
        }


@dataclass(slots=True)
class Section:
    name: str
    budget: int
    lines: list[str] = field(default_factory=list)
    tokens: int = 0
    memories: list[Memory] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)
    left_out: int = 0


@dataclass(frozen=True, slots=True)
class PromptContext:
    text: str
    tokens: int
    budget: int
    query: str | None
    sections: dict[str, Section]
    procedures_first: bool
    focus: str | None = None  # the part of the query weighed more in the recall (the latest message)

    @property
    def memory_ids(self) -> list[str]:
        """Every memory the text holds, in the order it shows them."""
        order = (PROCEDURES, MEMORIES) if self.procedures_first else (MEMORIES, PROCEDURES)
        return [m.memory_id for name in order for m in self.sections[name].memories]


def memory_line(memory: Memory) -> str:
    """One memory as the prompt shows it: ``- (2026-01-05, preference) content``."""
    line = f"- ({memory.created_at.date().isoformat()}, {memory.category}) {memory.content}"
    for number, step in enumerate(steps_of(memory.metadata), start=1):
        line += f"\n  {number}. {step.get('description', '')}"
        if step.get("tool"):
            line += f" [tool: {step['tool']}"
            if step.get("arguments"):
                line += " " + json.dumps(step["arguments"], ensure_ascii=False, sort_keys=True)
            line += "]"
    return line


def message_line(message: Message) -> str:
    speaker = message.role.value if not message.name else f"{message.role.value} ({message.name})"
    return f"{speaker}: {message.content}"


def assemble(
    counter: TokenCounter,
    *,
    budget: int,
    shares: Shares,
    window: Sequence[Message],
    memories: Sequence[Memory],
    procedures: Sequence[Memory],
    query: str | None,
    procedures_first: bool,
    focus: str | None = None,
) -> PromptContext:
    heading_tokens = {name: counter.count(HEADINGS[name]) for name in HEADINGS}
    mem_lines = [memory_line(m) for m in memories]
    proc_lines = [memory_line(m) for m in procedures]
    win_lines = [message_line(m) for m in reversed(window)]  # newest first: that is the order they are kept
    costs = {
        MEMORIES: counter.count_many(mem_lines),
        PROCEDURES: counter.count_many(proc_lines),
        WINDOW: counter.count_many(win_lines),
    }
    newest = costs[WINDOW][0] + heading_tokens[WINDOW] if win_lines else 0
    budgets = _with_the_newest(shares.budgets(budget), newest, budget)
    sections = {name: Section(name, budgets[name]) for name in (WINDOW, MEMORIES, PROCEDURES)}
    items: dict[str, list[tuple[str, Any]]] = {
        MEMORIES: list(zip(mem_lines, memories, strict=True)),
        PROCEDURES: list(zip(proc_lines, procedures, strict=True)),
        WINDOW: list(zip(win_lines, reversed(window), strict=True)),
    }
    taken = {name: 0 for name in items}

    def fill(name: str, allowance: int) -> int:
        """Take items of section ``name`` in order while they fit in ``allowance``; return what is left."""
        section = sections[name]
        while taken[name] < len(items[name]):
            cost = costs[name][taken[name]] + (0 if section.lines else heading_tokens[name])
            if cost > allowance:
                break
            line, item = items[name][taken[name]]
            section.lines.append(line)
            section.tokens += cost
            (section.messages if name == WINDOW else section.memories).append(item)
            allowance -= cost
            taken[name] += 1
        return allowance

    spare = sum(fill(name, budgets[name]) for name in (WINDOW, MEMORIES, PROCEDURES))
    spare += budget - sum(budgets.values())
    for name in (WINDOW, MEMORIES, PROCEDURES):
        spare = fill(name, spare)
    order = [PROCEDURES, MEMORIES, WINDOW] if procedures_first else [MEMORIES, PROCEDURES, WINDOW]
    text = _render(sections, order)
    # Joining lines may merge or split a token at a seam: trim until the whole fits.
    while counter.count(text) > budget and _drop_one(sections, order):
        text = _render(sections, order)
    for name in sections:
        section = sections[name]
        section.left_out = len(items[name]) - len(section.lines)
        if name == WINDOW:
            section.messages.reverse()  # oldest first, as the conversation ran
    return PromptContext(text, counter.count(text), budget, query, sections, procedures_first, focus)


def _with_the_newest(budgets: dict[str, int], newest: int, budget: int) -> dict[str, int]:
    """``budgets`` with the window's grown to hold the newest message (``newest`` tokens,
    with the heading), taken from the other two in proportion, where that message is
    larger than the window's share and fits the whole budget: it is the turn the agent
    answers, and a context without it showed everything but what was just said."""
    short = newest - budgets[WINDOW]
    others = budgets[MEMORIES] + budgets[PROCEDURES]
    if short <= 0 or newest > budget or others <= 0:
        return budgets
    short = min(short, others)
    from_memories = short * budgets[MEMORIES] // others
    return {
        WINDOW: budgets[WINDOW] + short,
        MEMORIES: budgets[MEMORIES] - from_memories,
        PROCEDURES: budgets[PROCEDURES] - (short - from_memories),
    }


def _render(sections: dict[str, Section], order: Sequence[str]) -> str:
    blocks = []
    for name in order:
        section = sections[name]
        if section.lines:
            # The window was filled from its newest message back; it reads oldest first.
            lines = list(reversed(section.lines)) if name == WINDOW else section.lines
            blocks.append("\n".join([HEADINGS[name], *lines]))
    return "\n\n".join(blocks)


def _drop_one(sections: dict[str, Section], order: Sequence[str]) -> bool:
    for name in reversed(order):
        section = sections[name]
        if section.lines:
            section.lines.pop()
            (section.messages if name == WINDOW else section.memories).pop()
            return True
    return False


def context_out(context: PromptContext) -> dict[str, Any]:
    """The structured form: the text, and per section what went in (ids included)."""

    def memory_item(memory: Memory) -> dict[str, Any]:
        item: dict[str, Any] = {
            "memory_id": memory.memory_id,
            "content": memory.content,
            "category": memory.category,
            "created_at": to_iso(memory.created_at),
        }
        steps = steps_of(memory.metadata)
        if steps:
            item["steps"] = steps
        return item

    sections: dict[str, Any] = {}
    for name, section in context.sections.items():
        body: dict[str, Any] = {"budget": section.budget, "tokens": section.tokens, "left_out": section.left_out}
        if name == WINDOW:
            body["messages"] = [
                {"role": m.role.value, "content": m.content, "name": m.name, "at": to_iso(m.at)}
                for m in section.messages
            ]
        else:
            body["memories"] = [memory_item(m) for m in section.memories]
        sections[name] = body
    return {
        "text": context.text,
        "tokens": context.tokens,
        "budget": context.budget,
        "query": context.query,
        "focus": context.focus,
        "procedures_first": context.procedures_first,
        "memory_ids": context.memory_ids,
        "sections": sections,
    }
