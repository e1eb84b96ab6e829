"""Sandbox jobs (queued / running / done) and the log tail of the selected job.

The log lines are the state's (``EpisodeState.job_logs``: the last lines of the job's
``stdout.log`` and ``stderr.log``, folded from events like everything else); the pane reads
no file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from textual.widgets import DataTable, Log

from console.episode.state import EpisodeState, JobLogTail
from console.episode.text import visible
from console.formats.job_record import MAX_SANDBOX_JOBS

from .common import NA, fmt, plain, seconds, sync_table
from .pane import Pane

if TYPE_CHECKING:
    from console.formats.job_record import JobRecord

STATE_STYLES = {
    "queued": "yellow",
    "running": "bold yellow",
    "succeeded": "green",
    "failed": "red",
    "cancelled": "magenta",
    "timed_out": "red",
}


def log_lines(job: JobRecord, tail: JobLogTail | None) -> list[str]:
    """What the log area shows for ``job``: its command, stdout's tail, then stderr's."""
    lines = [f"── {job.job_id}: {' '.join(job.argv or ()) or NA}"]
    if tail is not None:
        lines.extend(tail.stdout)
        if tail.stderr:
            lines.append("── stderr")
            lines.extend(tail.stderr)
    return [visible(line.expandtabs()) for line in lines]


class JobsPane(Pane):
    title = "Jobs"

    DEFAULT_CSS = """
    JobsPane DataTable { height: 1fr; }
    JobsPane Log { height: 1fr; border-top: dashed $panel-lighten-2; }
    """

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self._jobs: dict[str, JobRecord] = {}
        self._log_shown: tuple[JobRecord | None, JobLogTail | None] = (None, None)

    def compose(self):
        table = DataTable(id="jobs-table", cursor_type="row", zebra_stripes=True)
        table.add_columns("job", "state", "category", "slot", "time", "exit")
        yield table
        yield Log(id="job-log", max_lines=2000, auto_scroll=True)

    def show_state(self, state: EpisodeState) -> None:
        previous = self.state
        super().show_state(state)
        running = sum(1 for j in state.jobs if j.state in ("queued", "running"))
        subtitle = f"{running}/{MAX_SANDBOX_JOBS} slots"
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if previous is None or previous.jobs != state.jobs:
            rows = []
            self._jobs = {}
            for job in state.jobs:
                self._jobs[job.job_id] = job
                duration = job.duration_seconds
                rows.append(
                    (
                        job.job_id,
                        (
                            job.job_id,
                            plain(job.state, STATE_STYLES.get(job.state, "")),
                            fmt(job.category or job.kind),
                            fmt(job.slot),
                            seconds(duration) if duration is not None else NA,
                            fmt(job.result_code),
                        ),
                    )
                )
            sync_table(self.query_one(DataTable), rows, self.filter_text)
        self._show_log()

    def selected_job(self) -> JobRecord | None:
        table = self.query_one(DataTable)
        if table.row_count == 0:
            return None
        return self._jobs.get(list(table.rows)[table.cursor_row].value)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_log()

    def _show_log(self) -> None:
        job = self.selected_job()
        tail = self.state.job_logs.get(job.job_id) if job is not None and self.state is not None else None
        shown_job, shown_tail = self._log_shown
        if job is shown_job and tail is shown_tail:
            return
        self._log_shown = (job, tail)
        log = self.query_one(Log)
        log.clear()
        if job is not None:
            log.write_lines(log_lines(job, tail))
