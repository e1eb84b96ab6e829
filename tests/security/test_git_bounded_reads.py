"""Reading a repository or kernel.py never blocks or exhausts memory.

GitPython reads some repository files itself, in episcope's process (``.git/HEAD``,
``commondir``, the config, refs, ``packed-refs``), and the git facts and the diff screen
read ``kernel.py``. Each case plants a real FIFO, a link to ``/dev/zero`` or a huge sparse
file in a real repository and runs the real ``episcope status --json`` under a timeout (a
hang fails the test instead of hanging it) and, for the sizes, under an address-space
limit; the answer must come at once, with the reason in one line.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.episode.git_facts import MAX_KERNEL_BYTES
from console.episode.repo_files import LINE_FILE_BYTES
from spine_helpers import git, make_campaign

ROOT = Path(__file__).resolve().parents[2]
# Each read below is answered in well under a second; a blocked one runs into this.
HANG = 45
QUICK = 20  # a planted FIFO must not cost git's 60-second timeout either


# Runs the command it is given and prints that command's peak resident size (KiB) last on
# stderr: the status process's own, whoever ran before it in this test process.
PEAK_RSS = ("import resource, subprocess, sys\n"
            "done = subprocess.run(sys.argv[1:])\n"
            "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr)\n"
            "sys.exit(done.returncode)\n")


def run_python(*argv: str, env: dict | None = None, memory_cap: bool = False) -> subprocess.CompletedProcess:
    """``python argv`` from the repository in a process group of its own: one still running
    after HANG seconds fails the test, and its whole group (git processes blocked on a FIFO
    with it) is killed, so a regression leaves nothing behind."""
    proc = subprocess.Popen([sys.executable, *argv], cwd=ROOT, env=env or {**os.environ, "PYTHONPATH": str(ROOT)},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                            preexec_fn=limit_memory if memory_cap else None)
    try:
        out, err = proc.communicate(timeout=HANG)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def status(target: Path, tmp_path: Path, *, memory_cap: bool = False) -> tuple[dict, float]:
    doc, took, _ = measured_status(target, tmp_path, memory_cap=memory_cap)
    return doc, took


def measured_status(target: Path, tmp_path: Path, *, memory_cap: bool = False) -> tuple[dict, float, int]:
    """status --json of ``target``: (its document, seconds taken, peak RSS in KiB)."""
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "XDG_STATE_HOME": str(tmp_path / "state"),
           "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    done = run_python("-c", PEAK_RSS, sys.executable, "-m", "console.cli", "status", str(target), "--json", env=env,
                      memory_cap=memory_cap)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout), took, int(done.stderr.splitlines()[-1])


def plant_fifo(path: Path) -> None:
    if path.exists():
        path.unlink()
    os.mkfifo(path)


@pytest.fixture()
def campaign(tmp_path) -> Path:
    campaign, _, _ = make_campaign(tmp_path / "ws")
    return campaign


@pytest.mark.parametrize("name", ["HEAD", "commondir", "config", "packed-refs", "refs/heads/main", "index",
                                  "info/exclude"])
def test_a_fifo_among_the_files_gitpython_reads_is_refused_at_once(campaign, tmp_path, name):
    plant_fifo(campaign / ".git" / name)
    doc, took = status(campaign, tmp_path)
    assert took < QUICK
    assert doc["git"]["error"] == f".git/{name} is a FIFO, not a regular file"
    assert doc["git"]["head"] is None


@pytest.mark.parametrize("where", ["loose", "pack", "alternates"])
def test_a_fifo_in_the_object_store_is_refused_before_git_opens_it(campaign, tmp_path, where):
    """git opens these to answer nearly anything; GitPython's long-lived ``cat-file`` and
    ``merge-base`` would wait on the FIFO with no timeout at all."""
    head = git(campaign, "rev-parse", "HEAD")
    planted = {"loose": f"objects/{head[:2]}/{head[2:]}", "pack": "objects/pack/pack-0.idx",
               "alternates": "objects/info/alternates"}[where]
    plant_fifo(campaign / ".git" / planted)
    doc, took = status(campaign, tmp_path)
    assert took < QUICK
    assert doc["git"]["error"] == f".git/{planted} is a FIFO, not a regular file"


def test_a_linked_worktrees_own_head_is_checked_too(campaign, tmp_path):
    worktree = campaign.parent / ".atrex_long_horizon_worktrees" / "demo" / "e0001-abcdef12"
    admin = Path(git(worktree, "rev-parse", "--absolute-git-dir"))
    plant_fifo(admin / "HEAD")
    doc, took = status(worktree, tmp_path)
    assert took < QUICK
    assert doc["git"]["error"] == f"{admin / 'HEAD'} is a FIFO, not a regular file"


def test_a_fifo_worktree_config_is_refused_before_git_reads_it(campaign, tmp_path):
    """``config.worktree`` is read by git (with ``extensions.worktreeConfig``), never by
    GitPython: it is checked with the config files git includes."""
    git(campaign, "config", "extensions.worktreeConfig", "true")
    plant_fifo(campaign / ".git" / "config.worktree")
    doc, took = status(campaign, tmp_path)
    assert took < QUICK
    assert doc["git"]["error"] == f"{campaign / '.git' / 'config.worktree'}: not a regular file (a FIFO)"


def test_a_fifo_behind_a_symbolic_ref_is_refused_at_once(campaign, tmp_path):
    """GitPython follows HEAD's ``ref:`` and on through every symbolic ref it meets."""
    (campaign / ".git" / "refs" / "heads" / "main").write_text("ref: refs/heads/deeper\n")
    plant_fifo(campaign / ".git" / "refs" / "heads" / "deeper")
    doc, took = status(campaign, tmp_path)
    assert took < QUICK
    assert doc["git"]["error"] == ".git/refs/heads/deeper is a FIFO, not a regular file"


def test_a_head_that_links_out_of_the_repository_is_refused(campaign, tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (campaign / ".git" / "HEAD").unlink()
    (campaign / ".git" / "HEAD").symlink_to(tmp_path / "fifo")
    doc, took = status(campaign, tmp_path)
    assert took < QUICK
    assert doc["git"]["error"] == ".git/HEAD is a symbolic link, not a regular file"


def test_a_huge_head_is_refused_by_its_size_not_read(campaign, tmp_path):
    head = campaign / ".git" / "HEAD"
    with open(head, "r+b") as handle:
        handle.truncate(3 << 30)  # sparse: GitPython read all of it, past a 1 GiB address space
    doc, _ = status(campaign, tmp_path, memory_cap=True)
    assert doc["git"]["error"] == f".git/HEAD is {3 << 30} bytes, more than the {LINE_FILE_BYTES} allowed"


def test_a_head_one_byte_over_the_limit_is_refused(campaign, tmp_path):
    head = campaign / ".git" / "HEAD"
    content = head.read_bytes()
    head.write_bytes(content + b"\n" * (LINE_FILE_BYTES + 1 - len(content)))
    doc, _ = status(campaign, tmp_path)
    assert doc["git"]["error"] == f".git/HEAD is {LINE_FILE_BYTES + 1} bytes, more than the {LINE_FILE_BYTES} allowed"


def test_an_include_key_git_ignores_naming_a_fifo_is_never_opened(campaign, tmp_path):
    """git reads ``include.path`` only; GitPython merged every key of ``[include]`` and
    blocked on the FIFO for ever."""
    os.mkfifo(tmp_path / "fifo")
    config = campaign / ".git" / "config"
    config.write_text(config.read_text() + f"[include]\n\tnot-a-path = {tmp_path / 'fifo'}\n")
    assert git(campaign, "config", "--list")  # git itself is fine with it
    doc, took = status(campaign, tmp_path)
    assert took < QUICK
    assert doc["git"]["error"] is None and doc["git"]["head"] == git(campaign, "rev-parse", "HEAD")


def test_an_include_key_git_ignores_naming_dev_zero_is_never_read(campaign, tmp_path):
    """GitPython read ``/dev/zero`` until memory ran out (and, capped, swallowed the
    MemoryError): the peak shows it."""
    config = campaign / ".git" / "config"
    config.write_text(config.read_text() + "[include]\n\tx = /dev/zero\n")
    doc, took, peak_kib = measured_status(campaign, tmp_path, memory_cap=True)
    assert took < QUICK
    assert doc["git"]["error"] is None and doc["git"]["head"] == git(campaign, "rev-parse", "HEAD")
    assert peak_kib < 400 << 10


@pytest.mark.parametrize("section", ["include", 'includeIf "gitdir:/*/"', 'includeIf "gitdir:{tmp}*/.git"'])
def test_a_config_include_that_is_a_fifo_is_refused_before_git_reads_it(campaign, tmp_path, section):
    """An include git follows would block every git process until its timeout; one only
    GitPython's fnmatch took to match (``*`` crossing ``/``) blocked GitPython for ever."""
    os.mkfifo(tmp_path / "fifo")
    config = campaign / ".git" / "config"
    config.write_text(config.read_text() + f"[{section.format(tmp=tmp_path.parent)}]\n\tpath = {tmp_path / 'fifo'}\n")
    doc, took = status(campaign, tmp_path)
    assert took < QUICK
    assert doc["git"]["error"] == (f"config include '{tmp_path / 'fifo'}' (named in {config}) "
                                   "is a FIFO, not a regular file")


def test_a_nested_include_is_checked_relative_to_the_file_naming_it(campaign, tmp_path):
    (tmp_path / "conf.d").mkdir()
    os.mkfifo(tmp_path / "conf.d" / "inner")
    (tmp_path / "conf.d" / "outer").write_text("[include]\n\tpath = inner\n")
    config = campaign / ".git" / "config"
    config.write_text(config.read_text() + f"[include]\n\tpath = {tmp_path / 'conf.d' / 'outer'}\n")
    doc, took = status(campaign, tmp_path)
    assert took < QUICK
    assert doc["git"]["error"] == (f"config include 'inner' (named in {tmp_path / 'conf.d' / 'outer'}) "
                                   "is a FIFO, not a regular file")


def test_a_regular_include_is_still_followed_by_git(campaign, tmp_path):
    (tmp_path / "extra").write_text("[diff \"evil\"]\n\ttextconv = false\n")
    config = campaign / ".git" / "config"
    config.write_text(config.read_text() + f"[include]\n\tpath = {tmp_path / 'extra'}\n")
    doc, _ = status(campaign, tmp_path)
    assert doc["git"]["error"] is None and doc["git"]["head"] is not None


# -- kernel.py ---------------------------------------------------------------------------------


def kernel_facts(campaign: Path, tmp_path: Path, *, memory_cap: bool = False) -> dict:
    doc, took = status(campaign, tmp_path, memory_cap=memory_cap)
    assert took < QUICK
    return doc["git"]


def test_a_kernel_that_is_a_fifo_is_unknown_with_the_reason(campaign, tmp_path):
    worktree = campaign.parent / ".atrex_long_horizon_worktrees" / "demo" / "e0001-abcdef12"
    plant_fifo(worktree / "kernel.py")
    facts = kernel_facts(campaign, tmp_path)
    assert facts["kernel_sha256"] is None and facts["kernel_has_probe"] is None
    assert facts["kernel_error"] == "kernel.py: not a regular file (a FIFO)"
    assert facts["error"] is None  # the rest of the facts still come from git


def test_a_kernel_linked_to_dev_zero_is_unknown_with_the_reason(campaign, tmp_path):
    worktree = campaign.parent / ".atrex_long_horizon_worktrees" / "demo" / "e0001-abcdef12"
    (worktree / "kernel.py").unlink()
    (worktree / "kernel.py").symlink_to("/dev/zero")
    facts = kernel_facts(campaign, tmp_path)
    assert facts["kernel_sha256"] is None
    assert facts["kernel_error"] == "kernel.py: not a regular file (a device)"


@pytest.mark.parametrize("size", [MAX_KERNEL_BYTES + 1, 2 << 30])
def test_a_kernel_over_the_limit_is_not_read(campaign, tmp_path, size):
    worktree = campaign.parent / ".atrex_long_horizon_worktrees" / "demo" / "e0001-abcdef12"
    with open(worktree / "kernel.py", "r+b") as handle:
        handle.truncate(size)  # sparse
    facts = kernel_facts(campaign, tmp_path, memory_cap=True)
    assert facts["kernel_sha256"] is None
    assert facts["kernel_error"] == f"kernel.py: file is {size} bytes, more than the {MAX_KERNEL_BYTES} allowed"


def test_a_kernel_at_the_limit_is_hashed(campaign, tmp_path):
    worktree = campaign.parent / ".atrex_long_horizon_worktrees" / "demo" / "e0001-abcdef12"
    data = b"#" * (MAX_KERNEL_BYTES - 1) + b"\n"
    (worktree / "kernel.py").write_bytes(data)
    facts = kernel_facts(campaign, tmp_path)
    assert facts["kernel_sha256"] == hashlib.sha256(data).hexdigest() and facts["kernel_error"] is None


@pytest.mark.parametrize("plant", ["fifo", "dev_zero"])
def test_the_diff_screens_kernel_hash_never_blocks(campaign, tmp_path, plant):
    """``kernel_diff`` files a working-tree side's latency under kernel.py's sha256."""
    worktree = campaign.parent / ".atrex_long_horizon_worktrees" / "demo" / "e0001-abcdef12"
    if plant == "fifo":
        plant_fifo(worktree / "kernel.py")
    else:
        (worktree / "kernel.py").unlink()
        (worktree / "kernel.py").symlink_to("/dev/zero")
    code = ("import sys\nfrom console.episode.git_repo import open_repo\nfrom console.episode.kernel_diff import _kernel_sha\n"
            "with open_repo(sys.argv[1]) as repo:\n    print(_kernel_sha(repo, sys.argv[1], None))\n")
    done = run_python("-c", code, str(worktree))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "None"


# -- commits named by workspace files ----------------------------------------------------------

FACTS_AND_DIFF = (
    "import sys\n"
    "from console.episode.git_facts import read_git_facts\n"
    "from console.episode.kernel_diff import DiffSide, kernel_diff\n"
    "work, name = sys.argv[1], sys.argv[2]\n"
    "facts = read_git_facts(work, base_commit=name, candidate_commit=name)\n"
    "print(facts.error)\n"
    "print(kernel_diff(work, DiffSide('v0', name), DiffSide('working tree', None), {}).error)\n"
)


@pytest.mark.parametrize(("name", "planted"), [("evil", "evil"), ("evil", "refs/evil"), ("evil", "refs/tags/evil"),
                                               ("evil", "refs/heads/evil"), ("evil", "refs/remotes/evil"),
                                               ("evil", "refs/remotes/evil/HEAD"), ("abcd", "abcd")])
def test_a_name_looked_up_in_a_fifo_ref_never_blocks(campaign, tmp_path, name, planted):
    """A base or candidate commit, or a memory version's, is a name an agent wrote: GitPython
    looks it up by opening ``.git/<name>``, ``refs/tags/<name>``, … in this process, and a
    short id through a ``cat-file`` that git answers the same way, with no timeout."""
    path = campaign / ".git" / planted
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    done = run_python("-c", FACTS_AND_DIFF, str(campaign), name)
    assert done.returncode == 0, done.stderr[-2000:]
    facts_error, diff_error = done.stdout.splitlines()
    assert facts_error == f"candidate commit {name} not found"
    assert diff_error == f"v0's commit {name} is not in this repository"


def test_revision_syntax_in_a_name_is_not_resolved(campaign, tmp_path):
    """``main@{1}`` would have GitPython read the reflog, ``main:kernel.py`` a tree."""
    code = ("import sys\nfrom console.episode.git_facts import read_git_facts\n"
            "print(read_git_facts(sys.argv[1], candidate_commit=sys.argv[2]).error)\n")
    for name in ("main@{1}", "main~1", "main:kernel.py", "../../HEAD"):
        done = run_python("-c", code, str(campaign), name)
        assert done.stdout.strip() == f"candidate commit {name[:12]} not found", done.stderr[-2000:]
    ok = run_python("-c", code, str(campaign), "main")
    assert ok.stdout.strip() == "None"  # a plain ref name still resolves


def test_a_fifo_ref_named_like_a_full_commit_id_never_blocks_git(campaign, tmp_path):
    """git looks a full id up as a ref name too, to warn when both exist; every git process
    episcope starts has that turned off (``core.warnAmbiguousRefs``)."""
    base = git(campaign, "rev-parse", "HEAD")
    (campaign / "kernel.py").write_text("def kernel(x):\n    return x + 1\n")
    git(campaign, "commit", "-q", "-am", "candidate")
    head = git(campaign, "rev-parse", "HEAD")
    for ref in (base, head):
        os.mkfifo(campaign / ".git" / "refs" / "tags" / ref)
    code = ("import sys\nfrom console.episode.git_facts import read_git_facts\n"
            "from console.episode.kernel_diff import DiffSide, kernel_diff\n"
            "facts = read_git_facts(sys.argv[1], base_commit=sys.argv[2], candidate_commit=sys.argv[3])\n"
            "print(facts.error, facts.candidate_changes, facts.candidate_descends_from_base)\n"
            "diff = kernel_diff(sys.argv[1], DiffSide('v0', sys.argv[2]), DiffSide('v1', sys.argv[3]), {})\n"
            "print(diff.error, '+    return x + 1' in diff.text)\n")
    done = run_python("-c", code, str(campaign), base, head)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["None ('kernel.py',) True", "None True"]



CONFIG_READS = (
    "import os, subprocess, sys, time\n"
    "from console.episode import git_repo\n"
    "git_repo.GIT_TIMEOUT_SECONDS = 2\n"
    "for read in (lambda: git_repo.safe_environment(sys.argv[1]), lambda: git_repo.config_file(sys.argv[2], '--list')):\n"
    "    started = time.monotonic()\n"
    "    try:\n"
    "        read()\n"
    "    except git_repo.GitUnavailable as exc:\n"
    "        print(exc, time.monotonic() - started < 10)\n"
    "left = subprocess.run(['pgrep', '-P', str(os.getpid())], capture_output=True, text=True).stdout\n"
    "print(repr(left))\n"
)


def test_a_config_read_git_blocks_on_ends_at_the_timeout(tmp_path):
    """The config reads made before a repository is opened run through GitPython under the
    same timeout as every other git process: a FIFO that git waits on (here planted where
    no check looks first) costs the timeout and a one-line reason, and leaves no git behind
    (pgrep never lists itself)."""
    repo = tmp_path / "repo"
    git(tmp_path, "init", "-q", str(repo))
    plant_fifo(repo / ".git" / "config")
    plant_fifo(tmp_path / "loose.config")
    done = run_python("-c", CONFIG_READS, str(repo), str(tmp_path / "loose.config"))
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["git config did not finish in 2 s True"] * 2 + ["''"]
