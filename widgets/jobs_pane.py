"""Sandbox jobs (queued / running / done) and the live log of the selected job.

The log is the job's ``stdout.log`` beside its record, read by byte offset: only new bytes
each poll, and nothing at all while the selected job has finished and its log is read.
"""

from __future__ import annotations

import os
from pathlib import Path

from rich.text import Text
from textual.widgets import DataTable, Log

from console.episode.state import EpisodeState
from console.formats.job_record import MAX_SANDBOX_JOBS

from .common import NA, fmt, get, seconds, sync_table
from .pane import Pane

SANDBOX_DIR = Path(".atrex_long_horizon") / "sandbox"
STATE_STYLES = {
    "queued": "yellow",
    "running": "bold yellow",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "magenta",
    "timed_out": "red",
}
READ_LIMIT = 64 * 1024  # one poll reads at most this much; the rest comes next poll


def job_log_path(job, fallback_workspace: str | None) -> Path | None:
    workspace = get(job, "workspace") or fallback_workspace
    job_id = get(job, "job_id")
    if not workspace or not job_id:
        return None
    return Path(workspace) / SANDBOX_DIR / job_id / "stdout.log"


class JobsPane(Pane):
    title = "Jobs"

    DEFAULT_CSS = """
    JobsPane DataTable { height: 1fr; }
    JobsPane Log { height: 1fr; border-top: dashed $panel-lighten-2; }
    """

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self._jobs: dict[str, object] = {}
        self._log_path: Path | None = None
        self._log_offset = 0
        self.fallback_workspace: str | None = None

    def compose(self):
        table = DataTable(id="jobs-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("job", "state", "category", "slot", "time", "exit")
        yield table
        yield Log(id="job-log", max_lines=2000, auto_scroll=True)

    def on_mount(self) -> None:
        super().on_mount()
        self.set_interval(0.5, self.poll_log)

    def show_state(self, state: EpisodeState) -> None:
        previous = self.state
        super().show_state(state)
        running = sum(1 for j in state.jobs if get(j, "state") in ("queued", "running"))
        subtitle = f"{running}/{MAX_SANDBOX_JOBS} slots"
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if previous is not None and previous.jobs == state.jobs:
            return
        rows = []
        self._jobs = {}
        for job in state.jobs:
            job_id = get(job, "job_id")
            self._jobs[job_id] = job
            job_state = get(job, "state") or NA
            duration = get(job, "duration_seconds")
            rows.append(
                (
                    job_id,
                    (
                        job_id,
                        Text(job_state, style=STATE_STYLES.get(job_state, "")),
                        fmt(get(job, "category") or get(job, "kind")),
                        fmt(get(job, "slot")),
                        seconds(duration) if duration is not None else NA,
                        fmt(get(job, "result_code")),
                    ),
                )
            )
        sync_table(self.query_one(DataTable), rows, self.filter_text)
        self._follow_selected()

    def selected_job(self):
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return self._jobs.get(list(table.rows)[table.cursor_row].value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._follow_selected()

    def _follow_selected(self) -> None:
        job = self.selected_job()
        path = job_log_path(job, self.fallback_workspace) if job is not None else None
        if path != self._log_path:
            self._log_path = path
            self._log_offset = 0
            log = self.query_one(Log)
            log.clear()
            if job is not None:
                log.write_line(f"── {get(job, 'job_id')}: {' '.join(get(job, 'argv') or ()) or NA}")
            self.poll_log()

    def poll_log(self) -> None:
        path = self._log_path
        if path is None:
            return
        try:
            with open(path, "rb") as handle:
                size = os.fstat(handle.fileno()).st_size
                if size < self._log_offset:
                    self._log_offset = 0  # the log was replaced
                if size == self._log_offset:
                    return
                handle.seek(self._log_offset)
                data = handle.read(READ_LIMIT)
        except OSError:
            return
        end = data.rfind(b"\n")
        if end < 0 and len(data) < READ_LIMIT:
            return  # half a line: wait for the rest
        chunk = data if end < 0 else data[: end + 1]
        logs = self.query(Log)
        if not logs:
            return  # the pane is being torn down; nothing consumed
        self._log_offset += len(chunk)
        logs.first().write_lines(chunk.decode("utf-8", "replace").splitlines())
