"""The one way episcope runs git: on a repository it does not trust, reading only.

Every repository episcope looks at was written by an agent or came in an archive, and git
runs commands a repository's own config names: ``core.fsmonitor`` on every ``status``, the
clean filter of any driver ``.gitattributes`` assigns, hooks, pagers, external diffs,
textconv, lazy fetches from a promisor remote. So every git process episcope starts, by
hand or through GitPython, gets the environment built here:

- config given on the command line (``GIT_CONFIG_COUNT``/``KEY``/``VALUE``, which wins over
  every config file) turns off the fsmonitor, hooks (``core.hooksPath=/dev/null``), the
  untracked cache, signatures, every transport, and the commands of each filter and diff
  driver the repository's config defines (their names come from ``git config --list``
  of that repository, read before anything else runs);
- ``GIT_OPTIONAL_LOCKS=0`` so reading commands never refresh ``.git/index``;
- no system or user config (``GIT_CONFIG_NOSYSTEM``, ``GIT_CONFIG_GLOBAL=/dev/null``): what
  episcope reports depends on the repository only. A repository owned by another user is
  therefore refused by git's own ownership check (no ``safe.directory`` is given);
- pager, editor and prompts off; ``GIT_DIR``/``GIT_WORK_TREE`` set to the repository found,
  so a ``core.worktree`` line cannot point git at another directory.

On the host every git process is started by GitPython's command layer (``Git.execute``,
whose ``kill_after_timeout`` ends git and its children after ``GIT_TIMEOUT_SECONDS``): the
repository's own commands through :func:`open_repo`, and the config reads made before a
repository is opened (:func:`safe_environment`, :func:`config_file`).

GitPython also reads some repository files itself, in this process, where no timeout
reaches: before any ``Repo`` is opened, ``repo_files`` checks that each is a bounded regular
file (:func:`checked_git_dir`), and the config files git will include are checked the same
way before git runs (:func:`check_config_includes`). GitPython itself never follows an
include (:func:`_repo_type`).

Only :func:`new_repo` (``episcope init`` making a fresh repository from bundled files) keeps
the user's own config, for their commit identity; the repository-side settings still apply.

The module needs only the standard library at import, and :func:`run_git` only the standard
library at all: ``tools/abba.py`` runs git through it on the GPU machine, where GitPython is
not installed. GitPython is imported when the host first runs git.
"""

from __future__ import annotations

import functools
import os
import signal
import stat
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from console.formats.bounded_read import kind_of, read_regular_file
from console.formats.problems import FormatError

from .repo_files import CONFIG_BYTES, GitDirs, UnsafeRepository, check_revision, checked_git_dirs

if TYPE_CHECKING:
    import git

GIT_TIMEOUT_SECONDS = 60
# git stops at this depth of config includes (config.c MAX_INCLUDE_DEPTH).
INCLUDE_DEPTH = 10

# (key, value) given to every git process as command-line config.
SAFE_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),  # else git runs the named command (or starts a daemon) on status
    ("core.hooksPath", os.devnull),  # no hook can exist there
    ("core.untrackedCache", "false"),
    ("core.pager", "cat"),
    ("diff.external", ""),  # an empty command fails rather than runs; diffs pass --no-ext-diff
    ("log.showSignature", "false"),
    ("gpg.program", "false"),  # a %G? format (export-subst in git archive) would run it
    ("gpg.openpgp.program", "false"),
    ("gpg.x509.program", "false"),
    ("gpg.ssh.program", "false"),
    ("protocol.allow", "never"),  # no transport at all, so no lazy fetch from a promisor remote
    ("submodule.recurse", "false"),
    # A full object id is still looked up as a ref name too, to warn when one exists: the
    # ids episcope passes come from files, and a FIFO planted at refs/tags/<id> would block.
    ("core.warnAmbiguousRefs", "false"),
)

# Driver settings that name a command; each driver the repository defines gets them emptied.
DRIVER_COMMANDS = {
    "filter": (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false")),
    "diff": (("textconv", ""), ("command", "")),
    "merge": (("driver", ""),),
}

SAFE_ENVIRONMENT = {
    "GIT_CONFIG_NOSYSTEM": "1",
    "GIT_CONFIG_GLOBAL": os.devnull,
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "PAGER": "cat",
    "GIT_EDITOR": ":",
    "GIT_ASKPASS": "",
    "SSH_ASKPASS": "",
    "GIT_NO_REPLACE_OBJECTS": "1",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_ATTR_NOSYSTEM": "1",
    "GIT_EXTERNAL_DIFF": "",
}


class GitUnavailable(Exception):
    """git cannot read this repository (message is one line)."""


class RepoPaths(NamedTuple):
    top: Path  # the work tree: the directory holding ``.git``
    git_dir: Path  # its git directory (a linked worktree's own, under the common one)
    common_dir: Path  # the repository's shared git directory


def _config_env(pairs: list[tuple[str, str]]) -> dict[str, str]:
    env = {"GIT_CONFIG_COUNT": str(len(pairs))}
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"] = key
        env[f"GIT_CONFIG_VALUE_{i}"] = value
    return env


def _one_line(text: str | bytes) -> str:
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    return " ".join(text.split())[:300]


def _driver_overrides(listed: bytes) -> list[tuple[str, str]]:
    """Emptied commands for every filter/diff/merge driver named in ``git config --list -z``."""
    overrides: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for entry in listed.split(b"\0"):
        key = entry.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
        section, dot, rest = key.partition(".")
        name, dot2, _ = rest.rpartition(".")
        section = section.lower()
        if not (dot and dot2) or section not in DRIVER_COMMANDS or (section, name) in seen:
            continue
        seen.add((section, name))
        overrides.extend((f"{section}.{name}.{var}", value) for var, value in DRIVER_COMMANDS[section])
    return overrides


def _base_environment(*, user_config: bool = False) -> dict[str, str]:
    """The safe environment before the repository's drivers are known."""
    env = {**SAFE_ENVIRONMENT, **_config_env(list(SAFE_CONFIG))}
    if user_config:
        del env["GIT_CONFIG_NOSYSTEM"], env["GIT_CONFIG_GLOBAL"]
    return env


def _drivers_off(env: dict[str, str], listed: bytes) -> dict[str, str]:
    """``env`` with the commands of every driver in ``listed`` (``git config --list -z``) emptied."""
    return {**env, **_config_env([*SAFE_CONFIG, *_driver_overrides(listed)])}


def _git_config(cwd: str | os.PathLike[str], *args: str, env: dict[str, str]) -> tuple[int, bytes, str]:
    """``git config args`` in ``cwd`` through GitPython's command layer, under the timeout:
    (exit status, stdout bytes, stderr text). GitUnavailable when git cannot run or does not finish."""
    try:
        import git
    except ImportError as exc:  # GitPython is a dependency of the console; a broken install says so
        raise GitUnavailable(_one_line(str(exc))) from None
    if not os.access(cwd, os.X_OK):  # GitPython would run git in this process's directory instead
        raise GitUnavailable(f"cannot enter {os.fspath(cwd)}")
    try:
        # A Path, which GitPython only resolves: a str would have its ``$NAME``s and ``~`` expanded.
        status, out, err = git.Git(Path(cwd)).config(*args, env=env, kill_after_timeout=GIT_TIMEOUT_SECONDS,
                                                     with_extended_output=True, with_exceptions=False,
                                                     stdout_as_string=False, strip_newline_in_stdout=False)
    except git.GitCommandNotFound:
        raise GitUnavailable("git is not installed") from None
    except OSError as exc:
        raise GitUnavailable(_one_line(str(exc))) from None
    if status == -signal.SIGKILL and err.startswith("Timeout:"):  # what kill_after_timeout leaves
        raise GitUnavailable(f"git config did not finish in {GIT_TIMEOUT_SECONDS} s")
    return status, out, err


def safe_environment(cwd: str | os.PathLike[str], *, user_config: bool = False) -> dict[str, str]:
    """The variables every git process on the repository at ``cwd`` runs with.

    Runs ``git config --list`` there first (config is read, nothing runs) to learn which
    drivers to turn off; a config git cannot read (malformed, a FIFO, an endless include)
    raises GitUnavailable before anything else touches the repository.
    """
    env = _base_environment(user_config=user_config)
    status, listed, err = _git_config(cwd, "--list", "-z", env=env)
    if status != 0:
        raise GitUnavailable(f"git config: {_one_line(err)}")
    return _drivers_off(env, listed)


def config_file(path: str | os.PathLike[str], *args: str) -> tuple[int, bytes, str]:
    """``git config --file path args`` (as :func:`_git_config` answers), through GitPython under
    the timeout, with no system or user config and outside every repository.

    ``git config --file`` still reads the config of the repository it finds (by ``GIT_DIR``
    or around its working directory), includes and all: it runs in ``/dev`` with
    ``GIT_DIR`` naming no repository, so the only file it opens is ``path``."""
    env = {**SAFE_ENVIRONMENT, "GIT_DIR": os.devnull}
    return _git_config(os.path.dirname(os.devnull), "--file", os.fspath(path), *args, env=env)


def _run_plain(cwd: str | os.PathLike[str], argv: tuple[str, ...], env: dict[str, str],
               timeout: float) -> subprocess.CompletedProcess[bytes]:
    try:
        return subprocess.run(["git", *argv], cwd=cwd, env={**os.environ, **env}, stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout)
    except FileNotFoundError:
        raise GitUnavailable("git is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitUnavailable(f"git {argv[0]} did not finish in {timeout:g} s") from None
    except OSError as exc:
        raise GitUnavailable(_one_line(str(exc))) from None


def run_git(cwd: str | os.PathLike[str], *argv: str,
            timeout: float = GIT_TIMEOUT_SECONDS) -> subprocess.CompletedProcess[bytes]:
    """``git argv`` in ``cwd`` with the safe environment, by the standard library alone; the
    caller reads returncode, stdout and stderr (bytes).

    For ``tools/abba.py`` on the GPU machine, where GitPython is not installed: the one git
    of episcope's not started through GitPython. Its environment is the same, drivers
    included (``git config --list`` first, as :func:`safe_environment` does)."""
    env = _base_environment()
    listed = _run_plain(cwd, ("config", "--list", "-z"), env, timeout)
    if listed.returncode != 0:
        raise GitUnavailable(f"git config: {_one_line(listed.stderr)}")
    return _run_plain(cwd, argv, _drivers_off(env, listed.stdout), timeout)


def find_repo(path: str | os.PathLike[str]) -> RepoPaths | None:
    """The repository whose work tree holds ``path`` (walking up as git does), or None.

    Stops at a ``.git`` entry that is not a repository (or not a safe one), as git stops at
    one that is not a repository. GitPython is loaded only once a ``.git`` entry is found."""
    start = Path(path).resolve()
    for top in (start, *start.parents):
        if not os.path.lexists(top / ".git"):
            continue
        try:
            with open_repo(top) as repo:
                return RepoPaths(top, Path(repo.git_dir).resolve(), Path(repo.common_dir).resolve())
        except GitUnavailable:
            return None
    return None


def checked_git_dir(top: str | os.PathLike[str], *, objects: bool = False) -> GitDirs:
    """``repo_files.checked_git_dirs`` of the work tree ``top``; GitUnavailable (one line:
    ".git/HEAD is a FIFO, not a regular file") where it refuses or finds no ``.git``."""
    try:
        dirs = checked_git_dirs(top, objects=objects)
    except UnsafeRepository as exc:
        raise GitUnavailable(str(exc)) from None
    if dirs is None:
        raise GitUnavailable(f"not a git repository: {top} has no .git")
    return dirs


def git_dir_of(top: str | os.PathLike[str]) -> Path | None:
    """The git directory of the work tree ``top`` (its ``.git`` directory, or where its
    ``.git`` file points), read by GitPython without opening the repository, once the files
    it reads are checked; None when there is none or it is not safe to read."""
    from git.exc import GitError
    from git.repo.fun import find_submodule_git_dir

    try:
        checked_git_dir(top)
        found = find_submodule_git_dir(Path(top) / ".git")
    except (GitUnavailable, GitError, OSError):
        return None
    return None if found is None else Path(found)


def head_stamp(top: str | os.PathLike[str]) -> tuple[tuple[int, int, int] | None, ...] | None:
    """(inode, size, mtime) of the work tree's ``HEAD`` and index: what moves when a commit,
    checkout or ``git add`` happens there. None when ``top`` has no repository."""
    gitdir = git_dir_of(top)
    if gitdir is None:
        return None
    stamps: list[tuple[int, int, int] | None] = []
    for name in ("HEAD", "index"):
        try:
            st = os.stat(gitdir / name)
        except OSError:
            stamps.append(None)
            continue
        stamps.append((st.st_ino, st.st_size, st.st_mtime_ns))
    return tuple(stamps)


def check_config_includes(dirs: GitDirs) -> None:
    """Raises GitUnavailable when a config file git would include (``include.path``, an
    ``includeIf.<condition>.path`` whatever its condition) is there but is not a regular
    file of at most ``repo_files.CONFIG_BYTES``: git would block on a FIFO until its
    timeout, in every process it starts.

    A path is taken as git takes it: ``~`` is the home directory, a relative one is
    relative to the file that names it. A missing file is fine (git skips it)."""
    pending = [(Path(os.path.abspath(dirs.common_dir / "config")), 0),
               (Path(os.path.abspath(dirs.git_dir / "config.worktree")), 0)]
    seen: set[Path] = set()
    while pending:
        config, depth = pending.pop()
        if config in seen or depth > INCLUDE_DEPTH or not config.exists():
            continue
        seen.add(config)
        for named in _include_paths(config):
            target = config.parent / os.path.expanduser(named)
            try:
                info = target.stat()  # git follows a link here
            except OSError:
                continue
            if not stat.S_ISREG(info.st_mode):
                raise GitUnavailable(f"config include {named!r} (named in {config}) is {kind_of(info.st_mode)}, "
                                     "not a regular file")
            if info.st_size > CONFIG_BYTES:
                raise GitUnavailable(f"config include {named!r} (named in {config}) is {info.st_size} bytes, "
                                     f"more than the {CONFIG_BYTES} allowed")
            pending.append((target, depth + 1))


def _include_paths(config: Path) -> list[str]:
    """The include paths the config file ``config`` (already checked to be a bounded
    regular file) names itself, as git reads them.

    A file without the word ``include`` has none (a section name has no escapes), and most
    have none: git is asked only about the others, one file at a time (``--no-includes``,
    :func:`config_file`), so no include is opened before it is checked."""
    try:
        if b"include" not in read_regular_file(config, CONFIG_BYTES).lower():
            return []
    except (FormatError, OSError) as exc:
        raise GitUnavailable(f"{config}: {_one_line(str(exc))}") from None
    _, listed, _ = config_file(config, "--no-includes", "-z", "--get-regexp", r"^include(if\..*)?\.path$")
    paths = []
    for entry in listed.split(b"\0"):
        _, newline, value = entry.partition(b"\n")  # "key\nvalue"; a key alone has no value
        if newline and value:
            paths.append(os.fsdecode(value))
    return paths


@functools.cache
def _repo_type() -> type[git.Repo]:
    """GitPython's ``Repo`` whose config reader reads the repository's config file only,
    never a file it includes, and which resolves a name only once the ref files it would
    read are checked (``repo_files.check_revision``).

    GitPython merges includes by rules of its own: every key of ``[include]``, not only
    ``path``, and ``includeIf "gitdir:…"`` matched with ``fnmatch``, whose ``*`` crosses
    ``/`` where git's does not; so it would open files git never reads, unchecked, in this
    process. Turning that off costs nothing: episcope asks GitPython for ``core.bare``
    alone (``Repo.__init__`` does), and every setting git acts on is read by git itself,
    includes followed by git's rules, under a timeout. ``Repo`` offers no switch of its
    own (``config_reader`` builds a merging ``GitConfigParser``), hence the override of that
    public method; a ``Repo`` is only made for a work tree, so GitPython's private
    ``_config_reader`` (used when a git directory is opened directly) is never reached."""
    import git

    class UntrustedRepo(git.Repo):
        def config_reader(self, config_level: str | None = None) -> git.GitConfigParser:
            return git.GitConfigParser(os.path.join(self.common_dir, "config"), read_only=True,
                                       merge_includes=False, repo=self)

        def rev_parse(self, rev: str) -> git.Commit | git.Tree | git.TagObject | git.Blob:
            # ``Repo.commit(name)`` comes here. GitPython looks a name up by opening ref files
            # in this process (``.git/<name>``, ``refs/tags/<name>``, …), and a short id goes to
            # a ``cat-file`` that git answers the same way, without a timeout: each of those
            # files is checked first (a name comes from a file an agent wrote).
            try:
                check_revision(GitDirs(Path(self.git_dir), Path(self.common_dir)), self.working_dir, str(rev))
            except UnsafeRepository as exc:
                raise GitUnavailable(str(exc)) from None
            return super().rev_parse(rev)

    return UntrustedRepo


@contextmanager
def open_repo(top: str | os.PathLike[str]) -> Iterator[git.Repo]:
    """A GitPython ``Repo`` of the work tree ``top`` whose every git process runs with the
    safe environment; closed (its persistent ``cat-file`` processes ended) on exit.

    Every file GitPython and git read before a command can be timed out is checked first
    (:func:`checked_git_dir`, :func:`check_config_includes`). Raises GitUnavailable when the
    repository cannot be read."""
    top = Path(top)
    dirs = checked_git_dir(top, objects=True)
    check_config_includes(dirs)
    env = safe_environment(top)
    try:
        import git
        from git.repo.fun import find_submodule_git_dir
    except ImportError as exc:  # GitPython is a dependency of the console; a broken install says so
        raise GitUnavailable(_one_line(str(exc))) from None
    try:
        # GitPython must find the repository through ``.git`` (the files just checked):
        # else ``Repo`` would look for one in the work tree itself, whose HEAD is unchecked.
        if find_submodule_git_dir(top / ".git") is None:
            raise GitUnavailable(f"not a git repository: {top}")
        repo = _repo_type()(top)
    except (git.GitError, OSError, ValueError) as exc:
        raise GitUnavailable(f"not a git repository: {_one_line(str(exc))}") from None
    with repo:
        repo.git.update_environment(**env, GIT_DIR=os.fspath(repo.git_dir), GIT_WORK_TREE=os.fspath(top))
        yield repo


@contextmanager
def new_repo(top: str | os.PathLike[str]) -> Iterator[git.Repo]:
    """``git init`` of a fresh repository at ``top`` for episcope's own files; the user's
    config stays in effect (their commit identity), the repository-side settings apply."""
    import git

    top = Path(top)
    top.mkdir(parents=True, exist_ok=True)
    env = safe_environment(top, user_config=True)
    try:
        repo = git.Repo.init(top, env={**os.environ, **env})
    except (git.GitError, OSError) as exc:
        raise GitUnavailable(f"git init: {_one_line(str(exc))}") from None
    with repo:
        repo.git.update_environment(**env, GIT_DIR=os.fspath(repo.git_dir), GIT_WORK_TREE=os.fspath(top))
        yield repo


def read_errors() -> tuple[type[Exception], ...]:
    """What GitPython raises when a repository lacks what was asked (a missing object or
    ref, no commit yet, a broken ref), besides GitUnavailable."""
    from git.exc import GitError, ODBError

    return (GitUnavailable, GitError, ODBError, ValueError, TypeError, KeyError)


def head_commit(top: str | os.PathLike[str]) -> str | None:
    """The commit the work tree ``top`` has checked out, or None (no repository, no commit)."""
    try:
        with open_repo(top) as repo:
            return repo.head.commit.hexsha
    except read_errors():
        return None
