"""Sandbox jobs (queued / running / done) and the log tail of the selected job.

The log lines are the state's (``EpisodeState.job_logs``: the last lines of the job's
``stdout.log`` and ``stderr.log``, folded from events like everything else); the pane reads
no file. A running job's time is its elapsed time (``console.episode.kernels.job_elapsed``),
redrawn as the app's clock ticks; Enter shows the selected job's log uncut. "exit" is the
command's own exit status (``exit_code``, negative: killed by that signal), as ``status``
and ``episcope jobs`` print it; the sandbox's status (``result_code``, CODE there) is in
the detail.

On a campaign whose agent writes no job records (AKA's), the sandbox work is only in the
telemetry: the operations no job record names (``EpisodeState.traced_operations``) are
listed after the jobs as rows marked "traced" where a job's slot would be (the telemetry
names no slot), with what it says: operation id, state, category, duration, exit status.
The slot count is ``status``'s ``sandbox.running``, which counts both
(``console.episode.summary.running_jobs``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.widgets import DataTable, Log

from console.episode.episodes import operation_elapsed
from console.episode.kernels import job_elapsed
from console.episode.state import EpisodeState, JobLogTail, SandboxOperation
from console.episode.summary import running_jobs
from console.episode.text import visible
from console.formats.job_record import MAX_SANDBOX_JOBS

from .common import NA, add_columns, fmt, plain, seconds, selected_key, sync_table
from .pane import Pane, PaneTable

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
TRACED = "traced"  # marks a telemetry operation's row: no job record, so no slot or log


def log_lines(job: JobRecord, tail: JobLogTail | None) -> list[str]:
    """What the log area shows for ``job``: its command, stdout's tail, then stderr's."""
    lines = [f"── {job.job_id}: {' '.join(job.argv or ()) or NA}"]
    if tail is not None:
        lines.extend(tail.stdout)
        if tail.stderr:
            lines.append("── stderr")
            lines.extend(tail.stderr)
    return [visible(line.expandtabs()) for line in lines]


def operation_text(op: SandboxOperation, now: float | None) -> tuple[str, str]:
    """The detail of a traced operation: all the telemetry says of it."""
    elapsed = operation_elapsed(op, now)
    facts = (f"state {op.status}  category {fmt(op.category)}  time {seconds(elapsed) if elapsed is not None else NA}  "
             f"exit {fmt(op.exit_status)}  failure {fmt(op.failure_type)}")
    note = "traced in telemetry.jsonl only: no job record names it, so it has no slot and no log"
    return f"traced operation {visible(op.operation_id)}", "\n".join(
        [facts, f"iteration {visible(op.iteration_id)}  attempt {visible(op.attempt_id)}", "", note])


class JobsPane(Pane):
    title = "Jobs"

    DEFAULT_CSS = """
    JobsPane DataTable { height: 1fr; min-height: 3; }
    JobsPane Log { height: 1fr; border-top: dashed $panel-lighten-2; }
    """

    def __init__(self, *, number: int | None = None, id: str | None = None) -> None:
        super().__init__(number=number, id=id)
        self._jobs: dict[str, JobRecord] = {}
        self._operations: dict[str, SandboxOperation] = {}  # row key -> traced operation
        self._log_shown: tuple[JobRecord | None, JobLogTail | None] = (None, None)

    def compose_body(self):
        table = PaneTable(id="jobs-table", cursor_type="row", zebra_stripes=True, classes="pane-body")
        add_columns(table, "job", "state", "category", "slot", "time", "exit")
        yield table
        yield Log(id="job-log", max_lines=2000, auto_scroll=True, classes="pane-body")

    def empty_note(self, state: EpisodeState) -> str | None:
        return None if state.jobs or state.traced_operations else "no sandbox jobs yet"

    def show_state(self, state: EpisodeState, now: float | None = None) -> None:
        previous = self.state if self.has_body else None  # a body mounted now is drawn whole
        super().show_state(state, now)
        subtitle = f"{running_jobs(state)}/{MAX_SANDBOX_JOBS} slots"
        if self.border_subtitle != subtitle:
            self.border_subtitle = subtitle
        if not self.has_body:
            return
        if previous is None or previous.jobs != state.jobs or previous.traced_operations != state.traced_operations:
            self._sync_rows(state)  # running times move on with the clock's tick, not with every state
        self._show_log()

    def tick(self, now: float | None) -> None:
        super().tick(now)
        # The clock can tick while the pane is torn down (no table then: nothing to redraw).
        state = self.state
        if state is not None and self.query(DataTable) and (
                any(job.state == "running" for job in state.jobs) or any(op.status == "running" for op in state.traced_operations)):
            self._sync_rows(state)  # only the running jobs' time cells change

    def _sync_rows(self, state: EpisodeState) -> None:
        rows: list[tuple[str, tuple[Text | str, ...]]] = []
        self._jobs = {}
        self._operations = {}
        for job in state.jobs:
            self._jobs[job.job_id] = job
            elapsed = job_elapsed(job, self.now)
            rows.append(
                (
                    job.job_id,
                    (
                        job.job_id,
                        plain(job.state, STATE_STYLES.get(job.state, "")),
                        fmt(job.category or job.kind),
                        fmt(job.slot),
                        seconds(elapsed) if elapsed is not None else NA,
                        fmt(job.exit_code),
                    ),
                )
            )
        for op in state.traced_operations:
            key = f"{TRACED} {op.operation_id}"  # never a job id (one word)
            self._operations[key] = op
            elapsed = operation_elapsed(op, self.now)
            rows.append(
                (
                    key,
                    (
                        visible(op.operation_id),
                        plain(op.status, STATE_STYLES.get(op.status, "")),
                        fmt(op.category),
                        Text(TRACED, "dim italic"),
                        seconds(elapsed) if elapsed is not None else NA,
                        fmt(op.exit_status),
                    ),
                )
            )
        sync_table(self.query_one(DataTable), rows, self.filter_text)

    def selected_job(self) -> JobRecord | None:
        if not self.has_body:
            return None
        key = selected_key(self.query_one(DataTable))
        return None if key is None else self._jobs.get(key)

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
            if not log.is_mounted:  # written before its first layout: scroll once it has one
                log.call_after_refresh(log.scroll_end, animate=False, x_axis=False)

    def selected_operation(self) -> SandboxOperation | None:
        """The traced operation of the row under the cursor, if it is one."""
        if not self.has_body:
            return None
        key = selected_key(self.query_one(DataTable))
        return None if key is None else self._operations.get(key)

    def full_text(self) -> tuple[str, str] | None:
        job = self.selected_job()
        if job is None:
            op = self.selected_operation()
            return None if op is None else operation_text(op, self.now)
        tail = self.state.job_logs.get(job.job_id) if self.state is not None else None
        elapsed = job_elapsed(job, self.now)
        facts = (f"state {job.state}  category {job.category or job.kind or NA}  slot {fmt(job.slot)}  "
                 f"time {seconds(elapsed) if elapsed is not None else NA}  exit {fmt(job.exit_code)}  "
                 f"code {fmt(job.result_code)}")
        return f"job {job.job_id}", "\n".join([facts, "", *log_lines(job, tail)])
