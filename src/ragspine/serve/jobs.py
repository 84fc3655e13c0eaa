"""Background ingest jobs: an upload returns at once and ``GET /v1/jobs/{id}`` reports progress.

One worker thread runs the jobs in arrival order (a knowledge base takes one writer at a time
anyway); the uploaded files live in a folder of their own until the job ends.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ragspine.ingest import IngestReport

JOB_STATES = ("queued", "running", "done", "failed")


@dataclass
class Job:
    job_id: str
    kb: str
    files: int
    status: str = "queued"
    done: int = 0
    total: int = 0
    errors: list[dict[str, str]] = field(default_factory=list)
    report: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.job_id,
            "kb": self.kb,
            "status": self.status,
            "files": self.files,
            "done": self.done,
            "total": self.total,
            "errors": list(self.errors),
            "report": self.report,
        }


Ingest = Callable[[Callable[[int, int, str], None]], IngestReport]


class JobQueue:
    def __init__(self) -> None:
        self._jobs: dict[str, Job] = {}
        self._lock = threading.Lock()
        self._worker = ThreadPoolExecutor(1, thread_name_prefix="ragspine-ingest")

    def submit(self, kb: str, files: int, staging: Path, ingest: Ingest) -> Job:
        job = Job(secrets.token_hex(8), kb, files)
        with self._lock:
            self._jobs[job.job_id] = job
        self._worker.submit(self._run, job, staging, ingest)
        return job

    def _run(self, job: Job, staging: Path, ingest: Ingest) -> None:
        def progress(done: int, total: int, _: str) -> None:
            job.done, job.total = done, total

        job.status = "running"
        try:
            report = ingest(progress)
            hidden = f"{staging}{os.sep}"  # the server's folders are none of the client's business
            failed = [(f.replace(hidden, ""), e.replace(hidden, "")) for f, e in report.failed]
            job.errors = [{"file": Path(f).name, "error": e} for f, e in failed]
            job.report = replace(report, failed=failed).to_dict()
            job.status = "done"
        except Exception as exc:  # reported to the client through the job, never lost
            job.errors.append({"file": "", "error": str(exc)})
            job.status = "failed"
        finally:
            shutil.rmtree(staging, ignore_errors=True)

    def get(self, job_id: str) -> Job | None:
        with self._lock:
            return self._jobs.get(job_id)

    def close(self) -> None:
        self._worker.shutdown(wait=True, cancel_futures=False)
