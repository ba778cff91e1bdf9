"""HTTP handlers for moving memory in and out: a streamed export and a streamed import.

The export is sent a page of memories at a time, so a large namespace never sits
whole in memory. The import's body is spooled to a temporary file as it arrives
(memory up to ``SPOOL_BYTES``, disk beyond), then read line by line in a worker
thread; nothing is written unless every line is sound.
"""

from __future__ import annotations

import logging
import tempfile
from collections.abc import Iterator
from functools import partial
from typing import Annotated, Any

import anyio.to_thread
from litestar import Controller, Request, Response, get, post
from litestar.datastructures import State
from litestar.params import FromQuery, QueryParameter
from litestar.response import Stream

from api.auth import Access, Caller, audit_event
from api.controllers import NamespaceParam
from engine.errors import StoreError, Unauthenticated
from engine.importers import FORMATS, parse_mapping, run_import
from engine.portability import MEDIA_TYPE, deployment_id, open_export
from engine.records import DEFAULT_NAMESPACE
from engine.security import Permission
from engine.service import MemoryService

# An import body may be far larger than an API request: 50,000 memories with
# vectors are about 150 MB.
MAX_IMPORT_BYTES = 2 * 1024**3
SPOOL_BYTES = 16 * 1024**2
log = logging.getLogger(__name__)


def _service(state: State) -> MemoryService:
    service: MemoryService = state.service
    return service


def _while_valid(chunks: Iterator[bytes], access: Access) -> Iterator[bytes]:
    """The export's chunks (a page of memories each) for as long as the caller's token holds:
    revoked (or expired) mid-way, the export stops before its next page, without its end
    line, so the file reads as cut off (an import refuses it) rather than whole. Its audit
    entry, "ok", went out with the first byte; a second entry of the same request says it
    was cut, and why."""
    for number, chunk in enumerate(chunks):
        lapsed = access.lapsed() if number else None
        if lapsed is not None:
            detail = f"cut off before its end: the token {lapsed} during the export"
            log.warning("export of request %s by %r %s", access.record.request_id, access.actor, detail)
            try:
                access.security.append_audit(audit_event(access.record, 401, detail))
            except StoreError:
                log.exception("the audit entry of the export cut by a revocation could not be written")
            return
        yield chunk


class PortabilityController(Controller):
    path = "/v1"
    tags = ["portability"]

    @get("/export", sync_to_thread=True)
    def export(
        self,
        state: State,
        access: Caller,
        namespace: NamespaceParam = DEFAULT_NAMESPACE,
        versions: FromQuery[bool] = False,
        vectors: FromQuery[bool] = False,
    ) -> Stream:
        """A namespace as JSON Lines: a header, one line per memory (every status), an end line.

        ``versions=true`` adds each memory's history, ``vectors=true`` its vector.
        """
        scope = access.read_scope([namespace])
        service = _service(state)
        export = open_export(
            service,
            namespace,
            versions=versions,
            vectors=vectors,
            source_deployment=deployment_id(service.config.data_dir),
            scope=scope,
        )
        filename = "twinmem-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in namespace) + ".jsonl"
        return Stream(
            _while_valid(export.chunks(), access),
            media_type=MEDIA_TYPE,
            headers={"Content-Disposition": f'attachment; filename="{filename}"'},
        )

    @post("/import", status_code=200, request_max_body_size=MAX_IMPORT_BYTES)
    async def import_(
        self,
        request: Request[Any, Any, Any],
        state: State,
        access: Caller,
        namespace: Annotated[
            str | None, QueryParameter(min_length=1, max_length=128, description="Target namespace")
        ] = None,
        format: Annotated[str, QueryParameter(description=f"One of {', '.join(FORMATS)}")] = "twinmem",
        map: Annotated[str | None, QueryParameter(description="csv/jsonl: field=column,...")] = None,
        session_id: FromQuery[str | None] = None,
    ) -> Response[dict[str, Any]]:
        """Import a file (the request body): a twinmem export, or mem0, LangChain, CSV or JSONL data.

        All or nothing: 200 with the report when everything was written (memories
        already present count as unchanged, or as updated when the file is a later
        export of them), 422 with every line's problem when nothing was.
        """
        # Without a target namespace the file's own namespaces are written: only a writer of every one may.
        access.allow(namespace or "*", Permission.WRITE)
        # Only an admin of the target keeps the writers the file names; anyone else's import is theirs.
        admin = access.principal.may(namespace or "*", Permission.ADMIN)
        owner = None if admin or not access.tokens_mode else access.actor
        mapping = parse_mapping(map)
        service = _service(state)
        with tempfile.SpooledTemporaryFile(max_size=SPOOL_BYTES) as spool:
            async for chunk in request.stream():
                spool.write(chunk)
            if await anyio.to_thread.run_sync(access.revoked):
                raise Unauthenticated("the bearer token was revoked while the file arrived; nothing was imported")
            spool.seek(0)
            run = partial(
                run_import,
                service,
                spool,
                format_name=format,
                namespace=namespace,
                mapping=mapping,
                session_id=session_id,
                actor=access.actor,
                owner=owner,
            )
            report = await anyio.to_thread.run_sync(run)
        # Logged under the namespaces it wrote too: one without ?namespace was checked under '*'.
        access.note(namespaces=report.namespaces, memory_ids=report.stored)
        body = report.as_dict()
        if not report.written:
            count = len(report.errors)
            detail = f"{count} problem{'s' if count != 1 else ''} in the file; nothing was imported"
            return Response({"status_code": 422, "detail": detail, "report": body}, status_code=422)
        return Response(body, status_code=200)
