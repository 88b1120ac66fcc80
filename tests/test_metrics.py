"""`bxmem metrics`: bxmem's state as Prometheus metrics, content-free, checked by
promtool and read by node_exporter's textfile collector where they are installed
(opt-in: BXMEM_PROMTOOL, BXMEM_NODE_EXPORTER, or promtool on PATH)."""

from __future__ import annotations

import os
import re
import shutil
import socket
import stat
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import bxmem_inprocess, bxmem_main, honcho_config, register_secret, run_bxmem, write_log

from bxmem.commands import decide, metrics
from bxmem.commands.send import job as send
from bxmem.config import loader as config_module
from bxmem.demo.sample import turn_lines

TEXT = "the-zebra-password-cabinet"  # a message's words: never in the output
KEY = register_secret("metrics-trusted-key-42aa")
SAMPLE = re.compile(r'^([a-z_]+)(\{([a-z_]+="(?:[^"\\]|\\.)*"(?:,[a-z_]+="(?:[^"\\]|\\.)*")*)\})? (-?[0-9.e+]+)$')


def load():
    return config_module.load()


def samples(text: str) -> dict[tuple[str, tuple], float]:
    """Each sample by (name, its labels): the format, line by line, as the text format has it."""
    out = {}
    assert text.endswith("# EOF\n")
    for line in text.splitlines():
        if line.startswith("#"):
            assert re.match(r"^# (HELP|TYPE) [a-z_]+ .+$|^# EOF$", line), line
            continue
        match = SAMPLE.match(line)
        assert match, line
        labels = tuple(re.findall(r'([a-z_]+)="((?:[^"\\]|\\.)*)"', match.group(3) or ""))
        out[(match.group(1), labels)] = float(match.group(4))
    return out


def value(text: str, name: str, **labels: str) -> float:
    return samples(text)[(name, tuple(labels.items()))]


def run_metrics(*args: str) -> str:
    result = bxmem_inprocess("metrics", *args)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.fixture
def busy_home(home, tmp_path, brokerd, honcho, configure):
    """Turns sent, one failed, some pending behind an outage, a refused key: everything the metrics count."""
    key_file = tmp_path / "trusted.key"
    key_file.write_text(KEY + "\n")
    os.chmod(key_file, 0o600)
    honcho.keys["bm0-trusted"] = KEY
    configure(honcho.url, extra=f'\n[secrets.honcho_trusted]\nfile = "{key_file}"\n')
    write_log(home, "s", turn_lines(1, f"tell me about {TEXT}", "ok") + turn_lines(2, "second", "fine"))
    write_log(home, "t", turn_lines(1, "fetch", "ok", results=[{"untrusted": True, "class": "public"}]))
    assert bxmem_main("decide").returncode == 0
    honcho.inject("status", match=r"bm0-untrusted/sessions/[^/]+/messages$", status=422)
    send.run(load())
    return honcho


def test_the_output_counts_what_sync_shows(busy_home, home):
    text = run_metrics()
    assert value(text, "bxmem_outbox_sent_items_total") == 2
    assert value(text, "bxmem_outbox_failed_items", workspace="bm0-untrusted") == 1
    assert value(text, "bxmem_outbox_pending_items", workspace="bm0-trusted", kind="turn") == 0
    assert value(text, "bxmem_honcho_outage") == 0
    assert value(text, "bxmem_key_refused", workspace="bm0-trusted") == 0
    assert value(text, "bxmem_honcho_queue_up", workspace="bm0-trusted") == 1  # asked with its key
    assert value(text, "bxmem_honcho_queue_work_units", workspace="fleet", state="pending") == 0
    assert value(text, "bxmem_workspace_info", workspace="bm0-trusted", role="trusted") == 1
    assert value(text, "bxmem_local_only") == 0
    assert value(text, "bxmem_job_last_exit_code", job="decide") == 0
    assert time.time() - 60 < value(text, "bxmem_job_last_run_timestamp_seconds", job="decide") <= time.time()


def test_an_outage_pending_items_and_a_refused_key_are_counted(busy_home, home):
    write_log(home, "s", turn_lines(3, "third", "ok"))
    decide.run(load())
    busy_home.keys["bm0-trusted"] = "another-key"  # the stored key is refused now
    send.run(load())
    write_log(home, "t", turn_lines(2, "more", "ok", results=[{"untrusted": True, "class": "public"}]))
    decide.run(load())
    busy_home.stop()
    assert bxmem_main("send").returncode == 3  # the lean path records its exit
    text = run_metrics()
    assert value(text, "bxmem_key_refused", workspace="bm0-trusted") == 1
    assert value(text, "bxmem_outbox_pending_items", workspace="bm0-trusted", kind="turn") == 1
    assert value(text, "bxmem_outbox_pending_items", workspace="bm0-untrusted", kind="turn") == 1
    assert value(text, "bxmem_outbox_oldest_pending_age_seconds", workspace="bm0-untrusted") >= 0
    assert value(text, "bxmem_honcho_outage") == 1
    since = value(text, "bxmem_honcho_outage_since_timestamp_seconds")
    assert time.time() - 60 < since <= value(text, "bxmem_honcho_next_try_timestamp_seconds")
    assert value(text, "bxmem_job_last_exit_code", job="send") == 3
    assert value(text, "bxmem_honcho_queue_up", workspace="bm0-untrusted") == 0  # unreachable: a metric, not an error


def test_nothing_of_the_content_is_in_it(busy_home, home, tmp_path, config_file):
    text = run_metrics()
    for secret in (TEXT, KEY, "turn:s:1", "tell me", str(home), str(tmp_path), str(config_file), "trusted.key"):
        assert secret not in text, secret
    names = {name for name, _labels in samples(text)}
    assert all(name.startswith("bxmem_") for name in names)
    labels = {k for _name, labels in samples(text) for k, _v in labels}
    assert labels <= {"workspace", "role", "kind", "job", "state", "reason", "version"}


def test_items_held_by_the_configuration_are_counted_by_reason(home, brokerd, honcho, configure, config_file):
    configure(honcho.url)
    write_log(home, "s", turn_lines(1, "hello", "hi"))
    decide.run(load())
    config_file.write_text(honcho_config(honcho.url).replace('trusted = "bm0-trusted"', 'trusted = "bm0-renamed"'))
    text = run_metrics()
    assert value(text, "bxmem_outbox_held_items", workspace="bm0-trusted", reason="not-configured") == 1
    assert value(text, "bxmem_outbox_pending_items", workspace="bm0-renamed", kind="turn") == 0


def test_local_only_has_no_honcho_metrics(home):
    text = run_metrics()
    assert value(text, "bxmem_local_only") == 1
    assert not any(name.startswith("bxmem_honcho_queue") for name, _ in samples(text))
    assert not (home / "memory").exists()  # metrics made nothing in the home


def test_a_job_records_its_last_run_but_an_idle_or_busy_run_does_not(home, brokerd):
    from bxmem.store import job_runs
    from bxmem.store.files import JobLock

    write_log(home, "s", turn_lines(1, "hello", "hi"))
    assert run_bxmem("decide").returncode == 0
    record = home / "memory" / "bxmem" / "last-run-decide.json"
    first = record.stat().st_mtime_ns
    assert run_bxmem("decide").returncode == 0  # idle: answered by the idle check, writes nothing
    assert record.stat().st_mtime_ns == first
    write_log(home, "s", turn_lines(2, "again", "ok"))
    lock = JobLock(home / "memory" / "honcho.jsonl", "decide")
    assert lock.acquire()
    try:
        assert bxmem_main("decide").returncode == 0  # busy: another run holds the lock
    finally:
        lock.release()
    assert record.stat().st_mtime_ns == first
    saved, why = job_runs.load(home / "memory" / "bxmem", "decide")
    assert why is None and saved is not None and saved["exit_code"] == 0 and saved["duration_s"] >= 0


def test_an_exception_is_recorded_with_its_exit_code(home, monkeypatch):
    from bxmem.commands import lean_commands
    from bxmem.errors import StorageError
    from bxmem.store import job_runs

    state = home / "memory" / "bxmem"
    state.mkdir(parents=True)

    def boom():
        raise StorageError("disk full")

    with pytest.raises(StorageError):
        lean_commands.recorded("send", load(), False, boom)
    saved, _why = job_runs.load(state, "send")
    assert saved is not None and saved["exit_code"] == 1


def test_output_is_written_whole_and_readable_by_another_user(busy_home, tmp_path):
    target = tmp_path / "textfile" / "bxmem.prom"
    target.parent.mkdir()
    target.write_text("old\n")
    os.chmod(target, 0o600)
    before = target.stat().st_ino
    result = bxmem_inprocess("metrics", "--output", str(target))
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert stat.S_IMODE(target.stat().st_mode) == 0o644 and target.stat().st_ino != before  # renamed into place
    assert samples(target.read_text())
    assert sorted(p.name for p in target.parent.iterdir()) == ["bxmem.prom"]  # no temporary file left


def test_an_output_folder_that_is_not_there_is_one_line_and_exit_1(home, tmp_path):
    result = bxmem_inprocess("metrics", "--output", str(tmp_path / "missing" / "bxmem.prom"))
    assert result.returncode == 1 and result.stdout == ""
    assert result.stderr.startswith("bxmem: error: cannot write ") and result.stderr.count("\n") == 1


def test_labels_and_help_are_escaped():
    family = metrics.Family("bxmem_x", "gauge", "a \\ and\na newline").add(1, workspace='a"b\\c\nd')
    assert family.text() == (
        '# HELP bxmem_x a \\\\ and\\na newline\n# TYPE bxmem_x gauge\nbxmem_x{workspace="a\\"b\\\\c\\nd"} 1\n'
    )


# --- promtool and node_exporter, where installed -----------------------------------------------


def _tool(env: str, *names: str) -> str | None:
    return os.environ.get(env) or next((found for name in names if (found := shutil.which(name))), None)


PROMTOOL = _tool("BXMEM_PROMTOOL", "promtool")
NODE_EXPORTER = _tool("BXMEM_NODE_EXPORTER", "prometheus-node-exporter", "node_exporter")


@pytest.mark.skipif(
    PROMTOOL is None, reason="promtool is not installed (Debian: apt-get install prometheus; or BXMEM_PROMTOOL)"
)
def test_promtool_passes_every_kind_of_output(busy_home, home, configure, config_file):
    outputs = [run_metrics()]  # sent and failed
    write_log(home, "s", turn_lines(3, "third", "ok"))
    decide.run(load())
    busy_home.keys["bm0-trusted"] = "another-key"
    send.run(load())  # the trusted key refused
    write_log(home, "t", turn_lines(2, "more", "ok", results=[{"untrusted": True, "class": "public"}]))
    decide.run(load())
    busy_home.stop()
    bxmem_main("send")
    outputs.append(run_metrics())  # an outage, Honcho unreachable, a key refused, items pending
    config_file.write_text(
        config_file.read_text().replace('untrusted = "bm0-untrusted"', 'untrusted = "bm0-elsewhere"')
    )
    outputs.append(run_metrics())  # items held by the configuration
    assert value(outputs[-1], "bxmem_outbox_held_items", workspace="bm0-untrusted", reason="not-configured") == 1
    assert value(outputs[-2], "bxmem_key_refused", workspace="bm0-trusted") == 1
    configure(None)
    outputs.append(run_metrics())  # local-only
    assert PROMTOOL is not None  # else skipped
    for text in outputs:
        checked = subprocess.run([PROMTOOL, "check", "metrics"], input=text, capture_output=True, text=True, timeout=60)
        assert (checked.returncode, checked.stdout, checked.stderr) == (0, "", ""), (checked.stdout, checked.stderr)


@pytest.mark.skipif(NODE_EXPORTER is None, reason="node_exporter is not installed (BXMEM_NODE_EXPORTER)")
def test_node_exporters_textfile_collector_reads_it(busy_home, tmp_path):
    folder = tmp_path / "textfile"
    folder.mkdir()
    assert bxmem_inprocess("metrics", "--output", str(folder / "bxmem.prom")).returncode == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    assert NODE_EXPORTER is not None  # else skipped
    exporter = subprocess.Popen(
        [
            NODE_EXPORTER,
            "--collector.disable-defaults",
            "--collector.textfile",
            f"--collector.textfile.directory={folder}",
            f"--web.listen-address=127.0.0.1:{port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        scraped = ""
        for _ in range(100):
            try:
                scraped = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
                break
            except OSError:
                time.sleep(0.1)
    finally:
        exporter.terminate()
        exporter.wait(10)
    assert "node_textfile_scrape_error 0" in scraped
    assert "# TYPE bxmem_outbox_sent_items_total counter" in scraped and "bxmem_outbox_sent_items_total 2" in scraped


def test_the_metrics_unit_writes_where_its_sandbox_lets_it():
    unit = (Path(__file__).resolve().parents[1] / "systemd" / "bxmem-metrics.service").read_text()
    found = re.search(r"^ExecStart=\S+ --quiet metrics --output (\S+)$", unit, re.M)
    assert found, unit
    output = found.group(1)
    assert f"ReadWritePaths=-{os.path.dirname(output)}\n" in unit
    assert (
        "ProtectHome=read-only\n" in unit and "%h/.local/share/boxmaker" not in unit
    )  # reads the home, writes none of it


def test_docs_monitoring_lists_every_metric_and_no_other(home, configure):
    configure("http://127.0.0.1:9")
    emitted = {family.name for family in metrics.families(load())}
    documented = set(
        re.findall(
            r"^\| `(bxmem_[a-z_]+)` \|",
            (Path(__file__).resolve().parents[1] / "docs" / "monitoring.md").read_text(),
            re.M,
        )
    )
    assert emitted == documented
