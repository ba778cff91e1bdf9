"""HTTP handlers for the memory lifecycle: consolidate, roll back, restore, re-embedding progress."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from litestar import Controller, Response, get, post
from litestar.datastructures import State
from litestar.params import FromPath, JSONBody
from pydantic import Field

from api import schemas
from api.auth import Caller
from api.controllers import IfMatch, with_etag
from engine.codec import to_iso
from engine.lifecycle import Archive, Merge, Outcome, Purge, Report
from engine.records import DEFAULT_NAMESPACE
from engine.rollback import NamespaceRollback
from engine.security import Permission
from engine.service import MemoryService


def _service(state: State) -> MemoryService:
    service: MemoryService = state.service
    return service


class ConsolidateIn(schemas._Request):
    namespace: schemas.Namespace = DEFAULT_NAMESPACE
    dry_run: bool = Field(default=False, description="Only report what would be done.")


class RollbackMemoryIn(schemas._Request):
    namespace: schemas.Namespace = DEFAULT_NAMESPACE
    version: int = Field(ge=1, description="The version to bring back (as a new version).")
    expected_version: int | None = Field(
        default=None, ge=1, description="Roll back only while the memory is at this version (else 412); or If-Match."
    )


class RollbackNamespaceIn(schemas._Request):
    namespace: schemas.Namespace = DEFAULT_NAMESPACE
    as_of: schemas.UtcDatetime = Field(description="Restore every memory as it was at this moment.")


class RestoreIn(schemas._Request):
    namespace: schemas.Namespace = DEFAULT_NAMESPACE


def outcome_out(outcome: Outcome) -> dict[str, Any]:
    action = outcome.action
    out: dict[str, Any] = {"status": outcome.status, "detail": outcome.detail, "reason": action.reason}
    if isinstance(action, Archive | Purge):
        out.update(action="archive" if isinstance(action, Archive) else "purge", memory_ids=[action.memory_id])
    else:
        assert isinstance(action, Merge)
        out.update(action="merge", memory_ids=list(action.source_ids), merged=schemas.memory_out(action.merged))
    return out


def report_out(report: Report) -> dict[str, Any]:
    return {
        "namespace": report.namespace,
        "dry_run": report.dry_run,
        "now": to_iso(report.now),
        "scanned": report.scanned,
        "archived": report.archived,
        "purged": report.purged,
        "merged": report.merged,
        "merged_sources": report.merged_sources,
        "skipped": report.skipped,
        "actions": [outcome_out(o) for o in report.outcomes],
        "actions_truncated": report.truncated,
    }


def rollback_out(report: NamespaceRollback) -> dict[str, Any]:
    return {
        "namespace": report.namespace,
        "as_of": to_iso(report.as_of),
        "scanned": report.scanned,
        "restored": report.restored_count,
        "deleted": report.deleted_count,
        "unchanged": report.unchanged,
        "skipped": len(report.skipped),
        "restored_ids": report.restored,
        "deleted_ids": report.deleted,
        "skipped_ids": report.skipped,
    }


class LifecycleController(Controller):
    path = "/v1"
    tags = ["lifecycle"]

    @post("/memory/consolidate", sync_to_thread=True, status_code=200)
    def consolidate(self, state: State, access: Caller, data: JSONBody[ConsolidateIn]) -> dict[str, Any]:
        """Archive faded or expired memories, purge old soft deletes, merge near-duplicates."""
        access.allow(data.namespace, Permission.ADMIN)
        return report_out(_service(state).consolidator.run(data.namespace, dry_run=data.dry_run))

    @post("/memory/rollback", sync_to_thread=True, status_code=200)
    def rollback_namespace(self, state: State, access: Caller, data: JSONBody[RollbackNamespaceIn]) -> dict[str, Any]:
        """Restore every memory of a namespace as it was at ``as_of`` (recorded as new versions)."""
        access.allow(data.namespace, Permission.ADMIN)
        as_of: datetime = data.as_of
        return rollback_out(_service(state).rollbacks.to_time(data.namespace, as_of, actor=access.actor))

    @post("/memory/{memory_id:str}/rollback", sync_to_thread=True, status_code=200)
    def rollback_memory(
        self,
        state: State,
        access: Caller,
        memory_id: FromPath[str],
        data: JSONBody[RollbackMemoryIn],
        if_match: IfMatch = None,
    ) -> Response[dict[str, Any]]:
        """Write a new version of the memory equal to an earlier one; with ``If-Match`` or
        ``expected_version``, only while the memory is at that version (412 otherwise)."""
        expected = schemas.expected_version(if_match, data.expected_version)
        scope = access.write_scope(data.namespace)
        access.note(memory_ids=[memory_id])
        rollbacks = _service(state).rollbacks
        memory = rollbacks.to_version(
            data.namespace, memory_id, data.version, actor=access.actor, scope=scope, expected_version=expected
        )
        return with_etag(memory, schemas.memory_out(memory))

    @post("/memory/{memory_id:str}/restore", sync_to_thread=True, status_code=200)
    def restore(
        self, state: State, access: Caller, memory_id: FromPath[str], data: JSONBody[RestoreIn]
    ) -> dict[str, Any]:
        """Make an archived, superseded or soft-deleted memory active again."""
        scope = access.write_scope(data.namespace)
        access.note(memory_ids=[memory_id])
        memory = _service(state).rollbacks.restore(data.namespace, memory_id, actor=access.actor, scope=scope)
        return schemas.memory_out(memory)

    @get("/admin/reembed", sync_to_thread=True)
    def reembed(self, state: State, access: Caller) -> dict[str, Any]:
        """Progress of re-embedding after a change of embedding model."""
        access.require_admin()
        return _service(state).reembedder.progress().as_dict()
