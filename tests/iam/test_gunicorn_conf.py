"""iam/server/gunicorn.conf.py: multiprocess metrics need a directory cleared of dead processes' files at
start and each exited worker marked dead."""

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

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
