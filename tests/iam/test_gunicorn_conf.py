"""iam/server/gunicorn.conf.py: multiprocess metrics need a directory cleared of dead processes' files at
start and each exited worker marked dead; no control socket shared with every gunicorn of the host."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from gunicorn.app.base import Application
from gunicorn.config import Config

CONF = Path(__file__).resolve().parents[2] / "iam" / "server" / "gunicorn.conf.py"


def load_conf():
    spec = importlib.util.spec_from_file_location("iam_gunicorn_conf", CONF)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_start_drops_the_files_of_dead_processes_only(tmp_path, monkeypatch):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    conf = load_conf()
    gone, alive = dead_pid(), os.getpid()
    for name in (f"counter_{gone}.db", f"histogram_{gone}.db", f"counter_{alive}.db", "notes.txt"):
        (tmp_path / name).write_bytes(b"")

    conf.on_starting(server=None)

    assert sorted(path.name for path in tmp_path.iterdir()) == [f"counter_{alive}.db", "notes.txt"]


def test_an_unset_directory_becomes_a_fresh_one(monkeypatch):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", "")  # so that monkeypatch restores it afterwards
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    load_conf()
    made = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    assert made.is_dir() and list(made.iterdir()) == []
    made.rmdir()


def test_an_exited_worker_is_marked_dead(tmp_path, monkeypatch):
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    conf = load_conf()
    marked = []
    monkeypatch.setattr("prometheus_client.multiprocess.mark_process_dead", marked.append)

    class Worker:
        pid = 4242

    conf.child_exit(server=None, worker=Worker())
    assert marked == [4242]


def test_each_worker_takes_a_slot_of_the_turns_table_before_it_is_forked_and_frees_it_once_it_exited(
    tmp_path, monkeypatch
):
    """iam/server/turns.py: the master gives a forked worker its slot in the shared table of open
    connections, -1 (not yet accepting) until the worker serves, and frees it (-1) when it exits."""
    from iam.server import turns

    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    conf = load_conf()
    monkeypatch.setattr("prometheus_client.multiprocess.mark_process_dead", lambda pid: None)
    saved = list(turns.held)
    try:
        turns.held[:] = [-1] * turns.WORKER_SLOTS
        first, second = SimpleNamespace(pid=1), SimpleNamespace(pid=2)
        server = SimpleNamespace(WORKERS={})
        conf.pre_fork(server, first)
        server.WORKERS[first.pid] = first
        conf.pre_fork(server, second)
        assert (first.turn_slot, second.turn_slot) == (0, 1)
        turns.held[0], turns.held[1] = 3, 4  # both serve
        conf.child_exit(server, first)
        assert turns.held[0] == -1 and turns.held[1] == 4
    finally:
        turns.held[:] = saved


def test_the_service_opens_no_control_socket():
    """gunicorn 25.1+ opens ~/.gunicorn/gunicorn.ctl (or $XDG_RUNTIME_DIR's) by default, one path for every
    gunicorn on the host. The setting is read as gunicorn reads the file, so a gunicorn that
    renamed it fails here. (tests/live/test_slow_readers_live.py starts the tier and finds no socket.)"""
    assert "control_socket_disable" in Config().settings
    app = Application.__new__(Application)
    app.cfg = Config()
    app.load_config_from_file(str(CONF))
    assert app.cfg.control_socket_disable is True


@pytest.mark.parametrize("workers", [1, 64])
def test_a_worker_that_loaded_the_application_freezes_it_and_hashes_as_many_passwords_as_it_has_cores(
    workers,
):
    """Once the application is loaded (gunicorn's `post_worker_init`), its objects are frozen: a full
    collection no longer scans them, holding the GIL for 0.1 s under load. And the worker hashes at most
    its share of the cores' passwords at once (one at least), not one per thread. A process of its own."""
    show = (
        "import gc, importlib.util, os, types\n"
        f"spec = importlib.util.spec_from_file_location('conf', {str(CONF)!r})\n"
        "conf = importlib.util.module_from_spec(spec); spec.loader.exec_module(conf)\n"
        "from iam.wsgi import application\n"
        "from accounts.hashers import OwaspArgon2PasswordHasher as hasher\n"
        f"worker = types.SimpleNamespace(cfg=types.SimpleNamespace(workers={workers}))\n"
        "before = gc.get_freeze_count(); conf.post_worker_init(worker=worker)\n"
        "hashes = sum(hasher.at_once.acquire(blocking=False) for _ in range(256))\n"
        "print(before, gc.get_freeze_count(), len(gc.get_objects()), hashes, len(os.sched_getaffinity(0)))"
    )
    env = {"PATH": os.environ.get("PATH", ""), "DEBUG": "1", "DATABASE_URL": "sqlite:///:memory:"}
    process = subprocess.run(
        [sys.executable, "-c", show], env=env, cwd=CONF.parents[2], capture_output=True, text=True
    )
    assert process.returncode == 0, process.stderr
    before, frozen, scanned, hashes, cores = map(int, process.stdout.split())
    assert before == 0
    assert frozen > 50_000
    assert scanned < 1_000
    assert hashes == (cores if workers == 1 else 1)
