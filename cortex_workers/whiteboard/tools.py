"""The coordinator's tools: `update_mission`, `update_progress`, `manage_blocker`,
`log_decision` and `get_team_status`, offered to sessions created with `whiteboard: true`.

They are registered with the other tools (`register_whiteboard_tools`, by the runtime, with
the process's database engine), but only a session with a whiteboard is offered them
(`offered_to`), and a call from any other session is refused as an input error."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Engine

from ..messages import JsonObject
from ..store import whiteboard as store
from ..tools.registry import Tool, ToolRegistry
from ..tools.results import ToolContext, ToolInputError
from . import edits
from .summary import board_json

COORDINATOR = "coordinator"
_TEXT: JsonObject = {"type": "string", "minLength": 1, "maxLength": 4000}
_FOCUS: JsonObject = {
    "type": "string",
    "maxLength": 1000,
    "description": "What the team works on now",
}

SCHEMAS: dict[str, tuple[str, JsonObject]] = {
    "update_mission": (
        "Set the team's mission on the shared whiteboard (and optionally its current focus).",
        {"properties": {"mission": _TEXT, "focus": _FOCUS}, "required": ["mission"]},
    ),
    "update_progress": (
        "Record progress on the whiteboard: a note, optionally a percentage and a new focus.",
        {
            "properties": {
                "note": _TEXT,
                "percent": {"type": "integer", "minimum": 0, "maximum": 100},
                "focus": _FOCUS,
            },
            "required": ["note"],
        },
    ),
    "manage_blocker": (
        "Open a blocker on the whiteboard (action 'open' with text) or resolve one "
        "(action 'resolve' with its blocker_id and a resolution).",
        {
            "properties": {
                "action": {"enum": ["open", "resolve"]},
                "text": _TEXT,
                "blocker_id": {"type": "integer", "minimum": 1},
                "resolution": {"type": "string", "maxLength": 4000},
            },
            "required": ["action"],
        },
    ),
    "log_decision": (
        "Record a decision the team made, with its rationale, on the whiteboard.",
        {
            "properties": {"decision": _TEXT, "rationale": {"type": "string", "maxLength": 4000}},
            "required": ["decision"],
        },
    ),
    "get_team_status": (
        "Read the whole whiteboard: mission, focus, progress, blockers, decisions, updates.",
        {"properties": {}},
    ),
}
WHITEBOARD_TOOLS: tuple[str, ...] = tuple(SCHEMAS)


def offered_to(names: Sequence[str], *, has_whiteboard: bool) -> list[str]:
    """The tool names a session is offered: the whiteboard's only with a whiteboard."""
    if has_whiteboard:
        return [*names, *(n for n in WHITEBOARD_TOOLS if n not in names)]
    return [n for n in names if n not in WHITEBOARD_TOOLS]


def _manage_blocker(db: Any, sid: uuid.UUID, args: dict[str, Any]) -> edits.Applied:
    if args["action"] == "open":
        if not args.get("text"):
            raise ToolInputError("manage_blocker: action 'open' needs text")
        return edits.open_blocker(db, sid, args["text"], source=COORDINATOR)
    if "blocker_id" not in args:
        raise ToolInputError("manage_blocker: action 'resolve' needs blocker_id")
    return edits.resolve_blocker(
        db, sid, args["blocker_id"], args.get("resolution"), source=COORDINATOR
    )


def _run(db: Any, name: str, sid: uuid.UUID, args: dict[str, Any]) -> Any:
    match name:
        case "update_mission":
            return edits.update_mission(
                db, sid, args["mission"], args.get("focus"), source=COORDINATOR
            )
        case "update_progress":
            return edits.update_progress(
                db, sid, args["note"], args.get("percent"), args.get("focus"), source=COORDINATOR
            )
        case "manage_blocker":
            return _manage_blocker(db, sid, args)
        case "log_decision":
            return edits.log_decision(
                db, sid, args["decision"], args.get("rationale"), source=COORDINATOR
            )
        case _:
            board = store.read_board(db, sid)
            if board is None:
                raise edits.NoWhiteboard(str(sid))
            return board_json(board)


def _tool_fn(name: str, engine: Callable[[], Engine]) -> Callable[..., Any]:
    def call(ctx: ToolContext, **args: Any) -> Any:
        try:
            with engine().begin() as db:
                done = _run(db, name, uuid.UUID(ctx.session_id), args)
        except edits.NoWhiteboard:
            raise ToolInputError(
                f"{name}: this session has no whiteboard (create it with whiteboard: true)"
            ) from None
        except edits.UnknownBlocker as exc:
            raise ToolInputError(str(exc)) from None
        return {"ok": True, "applied": done.text} if isinstance(done, edits.Applied) else done

    return call


def register_whiteboard_tools(registry: ToolRegistry, engine: Callable[[], Engine]) -> None:
    """Register the five coordinator tools; `engine()` gives the process's database engine."""
    for name, (description, schema) in SCHEMAS.items():
        registry.register(
            Tool(
                name=name,
                description=description,
                parameters={"type": "object", "additionalProperties": False, **schema},
                fn=_tool_fn(name, engine),
                read_only=name == "get_team_status",
                takes_context=True,
                timeout_s=10.0,
            )
        )
