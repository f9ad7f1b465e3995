"""Local files other users cannot steer: the journal's folder, its records, results.

Another local user is played by a child process that drops to ``nobody`` to plant links
and files (the tests need root for that; without it they are skipped, saying so). The
host's ``fs.protected_symlinks`` is left as it is: the rules must hold where it is 0.
"""

import grp
import json
import os
import pwd
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from hcct_lite.cli import main
from hcct_lite.deploy.task_journal import TaskJournal, default_folder
from hcct_lite.runs import files
from hcct_lite.runs.files import folder_problem, private_folder, write_at, write_text
from hcct_lite.runs.results import write_json
from hcct_lite.runs.store import check_output_path

ROOT = os.geteuid() == 0
as_root = pytest.mark.skipif(not ROOT, reason="playing another user needs root (setuid)")


def _protected_symlinks() -> str:
    try:
        return Path("/proc/sys/fs/protected_symlinks").read_text().strip()
    except OSError:
        return "unknown"


def as_nobody(action) -> None:
    """Run ``action()`` in a child process as the user ``nobody``; fail if it fails."""
    user = pwd.getpwnam("nobody")
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.setgroups([])
            os.setgid(user.pw_gid)
            os.setuid(user.pw_uid)
            action()
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the planting child failed"


@pytest.fixture
def shared():
    """A folder every user can write in, with the sticky bit (as the temporary folder).

    In the temporary folder itself: pytest's own folders are closed to other users.
    """
    folder = Path(tempfile.mkdtemp(prefix="hcct-shared-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def precious(tmp_path):
    """A root-owned file and folder another user would like written to."""
    victim = tmp_path / "victim"
    victim.mkdir(mode=0o755)
    victim.chmod(0o755)
    (victim / "passwd").write_text("root:x:0:0\n")
    return victim


@as_root
def test_a_state_dir_planted_as_a_link_by_another_user_is_refused(shared, precious):
    link = shared / "hcct-silo-exec"
    as_nobody(lambda: os.symlink(precious, link))
    with pytest.raises(ValueError, match=r"is a symbolic link \(to .*victim\), not a folder"):
        TaskJournal(link)
    assert stat.S_IMODE(precious.stat().st_mode) == 0o755  # never chmodded
    assert sorted(p.name for p in precious.iterdir()) == ["passwd"]
    print("fs.protected_symlinks =", _protected_symlinks())


@as_root
def test_a_folder_others_can_write_is_refused_and_its_planted_lock_untouched(shared, precious):
    state = shared / "state"
    state.mkdir()
    state.chmod(0o1777)  # world-writable, as a careless --state-dir
    as_nobody(lambda: os.symlink(precious / "passwd", state / "lock"))
    assert main(["silo-exec", "--insecure", "--state-dir", str(state)]) == 2
    assert (precious / "passwd").read_text() == "root:x:0:0\n"
    assert stat.S_IMODE(state.stat().st_mode) == 0o1777  # not the executor's to change


@as_root
def test_a_folder_of_another_user_or_readable_by_others_is_refused(shared, capsys):
    theirs = shared / "theirs"
    as_nobody(lambda: os.mkdir(theirs, 0o700))
    assert folder_problem(theirs, private=True) == "belongs to nobody"
    open_to_all = shared / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o755)
    with pytest.raises(ValueError, match=r"other users can read it \(mode 0755\)"):
        TaskJournal(open_to_all)
    assert stat.S_IMODE(open_to_all.stat().st_mode) == 0o755


@as_root
def test_a_folder_under_one_others_can_swap_is_refused(shared):
    loose = shared / "loose"
    loose.mkdir()
    loose.chmod(0o777)  # no sticky bit: anyone may rename what is inside
    with pytest.raises(
        ValueError, match="other users can write to .*loose, a folder above it with no sticky bit"
    ):
        TaskJournal(loose / "state")
    assert not (loose / "state").exists()


@as_root
def test_a_planted_temporary_or_record_never_receives_a_token(shared, precious):
    state = shared / "state"
    journal = TaskJournal(state)
    # the folder is private: another user cannot plant anything in it at all
    with pytest.raises(AssertionError, match="planting child failed"):
        as_nobody(lambda: os.symlink(precious / "passwd", state / "task-9.tmp"))
    # a link found there (say, planted while the folder was open) is replaced, not followed
    os.symlink(precious / "passwd", state / "task-9.json")
    journal._write("task-9.json", {"token": "secret"})
    assert (precious / "passwd").read_text() == "root:x:0:0\n"
    assert not (state / "task-9.json").is_symlink()
    journal.close()


def test_the_default_folder_is_the_users_own_not_a_shared_one():
    folder = default_folder("127.0.0.1:9094")
    assert folder.parent == Path.home() / ".cache" / "hcct_lite"
    assert folder.name == "silo-exec-127.0.0.1_9094"


def test_a_new_folder_is_private_and_opened_without_following_links(tmp_path):
    fd = private_folder(tmp_path / "new")
    try:
        assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o700
        write_at(fd, "a.json", b"{}")
        assert (tmp_path / "new" / "a.json").read_bytes() == b"{}"
        os.rename(tmp_path / "new", tmp_path / "moved")  # swapped after the check
        write_at(fd, "b.json", b"[]")  # still the folder that was checked
        assert (tmp_path / "moved" / "b.json").exists() and not (tmp_path / "new").exists()
    finally:
        os.close(fd)


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("task-x.json", "{}"),
        ("task-2147483000.json", "[1, 2]"),
        ("task-2147483001.json", "null"),
        ("task-2147483002.json", '{"token": 5}'),
        ("task-2147483003.json", "{not json"),
        ("task-.json", "{}"),
        ("task-99999999999999999999.json", "{}"),
    ],
)
def test_a_corrupt_journal_is_set_aside_and_the_silo_serves(tmp_path, caplog, name, content):
    from hcct_lite.deploy import silo_exec

    folder = tmp_path / "state"
    TaskJournal(folder).close()
    (folder / name).write_text(content)
    journal = TaskJournal(folder)
    executor = silo_exec.ForkExecutor(None, 0, journal, lambda token: None)
    executor.reconcile()  # neither an exception nor a traceback: one line, then serving
    assert not (folder / name).exists() and (folder / f"{name}.set-aside").exists()
    said = [r.getMessage() for r in caplog.records if "set aside" in r.getMessage()]
    assert len(said) == 1 and name in said[0]
    assert journal.pids() == []
    journal.close()


def test_a_record_that_is_a_folder_or_a_link_is_set_aside(tmp_path, caplog):
    folder = tmp_path / "state"
    TaskJournal(folder).close()
    (folder / "task-11.json").mkdir()
    os.symlink("/etc/hostname", folder / "task-12.json")
    journal = TaskJournal(folder)
    assert journal.pids() == []
    assert sorted(p.name for p in folder.glob("*.set-aside")) == [
        "task-11.json.set-aside",
        "task-12.json.set-aside",
    ]
    journal.close()


@pytest.mark.parametrize(
    ("state_dir", "words"),
    [
        ("regular-file", "is not a folder"),
        ("/dev/null", "is not a folder"),
        ("/proc/self/x", "cannot be made"),
        ("/sys/x", "cannot be made"),
        ("/proc/self/environ", "is not a folder"),
    ],
)
def test_a_state_dir_that_is_no_folder_is_one_line(tmp_path, capsys, state_dir, words):
    if state_dir == "regular-file":
        state_dir = str(tmp_path / "file")
        Path(state_dir).write_text("x")
    assert main(["silo-exec", "--insecure", "--state-dir", state_dir]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hcct-lite: error: ") and words in err[0]


@as_root
def test_results_never_follow_a_link_nor_enter_a_folder_others_can_steer(shared, precious):
    theirs = shared / "result.json"
    as_nobody(lambda: os.symlink(precious / "passwd", theirs))
    write_json(str(theirs), {"a": 1})  # root may replace another user's link; never follows it
    assert (precious / "passwd").read_text() == "root:x:0:0\n" and not theirs.is_symlink()
    loose = shared / "loose"
    loose.mkdir()
    loose.chmod(0o777)
    with pytest.raises(ValueError, match="no sticky bit"):
        write_text(loose / "table.md", "x")
    assert (
        main(
            [
                "compare",
                "--task",
                "motivating",
                "--schemes",
                "global",
                "--seeds",
                "0",
                "--out",
                str(shared),
                "--quiet",
            ]
        )
        == 2
    )
    mine = shared / "mine.json"
    os.symlink(precious / "passwd", mine)  # this user's own link: replaced, never followed
    write_json(str(mine), {"a": 1})
    assert json.loads(mine.read_text()) == {"a": 1} and not mine.is_symlink()
    assert (precious / "passwd").read_text() == "root:x:0:0\n"


def test_the_default_folder_is_made_private_with_the_folders_it_needs(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))  # a home without ~/.cache yet
    journal = TaskJournal(default_folder("127.0.0.1:9094"))
    for folder in (
        tmp_path / ".cache",
        tmp_path / ".cache" / "hcct_lite",
        tmp_path / ".cache" / "hcct_lite" / "silo-exec-127.0.0.1_9094",
    ):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    journal.close()


@as_root
def test_another_users_link_on_the_way_is_refused(shared, precious):
    via = shared / "results"
    as_nobody(lambda: os.symlink(precious, via))  # "results" leads into root's folder
    with pytest.raises(ValueError, match="on its way, is a link nobody made"):
        write_json(str(via / "passwd"), {"a": 1})
    assert (precious / "passwd").read_text() == "root:x:0:0\n"
    with pytest.raises(ValueError, match="on its way, is a link nobody made"):
        TaskJournal(via / "state")
    assert not (precious / "state").exists()


SHARED = 4001  # a gid that is not this user's


def fake_users(monkeypatch, groups: dict, primary: dict) -> None:
    """Play the user database: ``groups`` gid -> listed members, ``primary`` name -> pw_gid.

    This user is ``me``, whose primary group is its own; any other gid is unknown.
    """

    def passwd(name, uid, gid):
        return pwd.struct_passwd((name, "x", uid, gid, "", "/", "/bin/sh"))

    users = [passwd("me", os.getuid(), os.getgid())]
    users += [passwd(n, 5000 + i, g) for i, (n, g) in enumerate(primary.items())]

    def getgrgid(gid):
        if gid not in groups:
            raise KeyError(gid)
        return grp.struct_group((f"g{gid}", "x", gid, groups[gid]))

    def getpwuid(uid):
        return next(u for u in users if u.pw_uid == uid)

    monkeypatch.setattr(files.grp, "getgrgid", getgrgid)
    monkeypatch.setattr(files.pwd, "getpwall", lambda: users)
    monkeypatch.setattr(files.pwd, "getpwuid", getpwuid)


def _st(mode: int, gid: int) -> os.stat_result:
    return os.stat_result((stat.S_IFDIR | mode, 0, 0, 1, os.getuid(), gid, 0, 0, 0, 0))


@pytest.mark.parametrize(
    ("mode", "gid", "groups", "primary", "who"),
    [
        (0o770, SHARED, {SHARED: []}, {"alice": SHARED}, f"alice, of group g{SHARED}"),
        (0o770, SHARED, {SHARED: ["me", "bob"]}, {}, f"bob, of group g{SHARED}"),
        (0o770, os.getgid(), {os.getgid(): []}, {}, None),  # my own private group
        (0o770, os.getgid(), {os.getgid(): ["me"]}, {}, None),
        (0o770, SHARED, {SHARED: ["me"]}, {}, f"anyone in group g{SHARED}"),  # not mine
        (0o770, 4242, {}, {}, "anyone in group 4242 (an unknown group)"),
        (0o777, os.getgid(), {os.getgid(): []}, {}, "everyone"),
        (0o750, SHARED, {SHARED: []}, {"alice": SHARED}, None),  # not group-writable
    ],
)
def test_who_else_may_write_counts_users_whose_primary_group_it_is(
    monkeypatch, mode, gid, groups, primary, who
):
    fake_users(monkeypatch, groups, primary)
    assert files.other_writer(_st(mode, gid)) == who
    assert files.others_can_write(_st(mode, gid)) is (who is not None)


def test_a_folder_another_user_writes_through_their_primary_group_is_refused(tmp_path, monkeypatch):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o770)
    result = shared / "result.json"
    result.write_text("{}")
    result.chmod(0o660)
    gid = shared.stat().st_gid
    fake_users(monkeypatch, {gid: []}, {"alice": gid})  # alice is never listed in gr_mem
    assert (
        folder_problem(shared) == f"other users can write to it (mode 0770: alice, of group g{gid})"
    )
    with pytest.raises(ValueError, match=rf"^{shared}: other users .*0770: alice") as err:
        private_folder(shared)
    assert len(str(err.value).splitlines()) == 1
    with pytest.raises(ValueError, match=rf"^--out {shared}: other users .*0770: alice"):
        check_output_path(str(shared), folder=True, what="--out")
    with pytest.raises(ValueError, match=rf"^--json {result}: .*{shared}, a folder .*\(alice"):
        check_output_path(str(result))
    assert files.output_problem(result).endswith(f"no sticky bit (alice, of group g{gid})")


def test_a_folder_in_my_own_private_group_is_fine(tmp_path, monkeypatch):
    shared = tmp_path / "mine"
    shared.mkdir()
    shared.chmod(0o770)
    if shared.stat().st_gid != os.getgid():
        pytest.skip("the temporary folder gives new folders another group")
    fake_users(monkeypatch, {os.getgid(): []}, {})
    assert folder_problem(shared) is None
    assert files.output_problem(shared, folder=True) is None
    assert files.output_problem(shared / "result.json") is None
