"""`bxmem units print|install|uninstall`: the units generated from the packaged
templates for this host's bxmem, home and configuration, installed and enabled
through systemctl (a stand-in here that records what it is asked; the real one:
scripts/systemd-rig, tests/test_real_systemd.py), and removed exactly."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROOT, bxmem_inprocess

from bxmem.commands import units

TEMPLATES = sorted(p.name for p in (ROOT / "systemd").glob("bxmem-*"))


@pytest.fixture
def owner(tmp_path, monkeypatch) -> Path:
    """A user whose home init made, with a systemctl that records what it is asked."""
    user = tmp_path / "user"
    user.mkdir()
    for name in ("BOXMAKER_HOME", "BXMEM_CONFIG", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(user))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemctl").write_text(f'#!/bin/sh\necho "$*" >> {tmp_path / "systemctl.log"}\n')
    (bin_dir / "systemctl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    assert bxmem_inprocess("init", "--url", "http://127.0.0.1:9", "--agent", "a0", "--owner", "kyle").returncode == 0
    return user


def asked(owner: Path) -> list[str]:
    log = owner.parent / "systemctl.log"
    return log.read_text().splitlines() if log.exists() else []


def directives(text: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(r"^[A-Za-z]+=", line)]


def printed(*args: str) -> dict[str, str]:
    result = bxmem_inprocess("units", "print", *args)
    assert result.returncode == 0, result.stderr
    parts = re.split(r"^# (/\S+)\n", result.stdout, flags=re.M)
    return {path: text.rstrip("\n") + "\n" for path, text in zip(parts[1::2], parts[2::2], strict=True)}


def as_user(owner: Path, name: str):
    """pwd's entry for a user `name` whose home is `owner`'s (what sudo's SUDO_USER names)."""
    import pwd

    entry = pwd.getpwuid(os.getuid())
    return pwd.struct_passwd(
        (name, entry.pw_passwd, entry.pw_uid, entry.pw_gid, entry.pw_gecos, str(owner), entry.pw_shell)
    )


def test_every_template_is_generated_with_this_host_s_paths(owner):
    home = owner / ".local" / "share" / "boxmaker"
    generated = printed()
    unit_dir = owner / ".config" / "systemd" / "user"
    assert sorted(generated) == [str(unit_dir / name) for name in TEMPLATES]
    for path, text in generated.items():
        template = (ROOT / "systemd" / Path(path).name).read_text()
        lines = directives(text)
        assert not [line for line in lines if "%h" in line], path
        assert len(lines) == len(directives(template)), "a directive added or lost"
        if path.endswith(".service"):
            job = Path(path).stem.removeprefix("bxmem-")
            execs = [line for line in lines if line.startswith("ExecStart=")]
            assert execs and execs[0].startswith(f"ExecStart={sys.executable} -m bxmem --quiet {job}")  # this bxmem
            if job in ("decide", "mirror", "send"):  # the jobs that write the home
                assert f"ReadWritePaths={home}" in lines
            assert not [line for line in lines if line.startswith(("Environment=", "User="))]  # nothing to tell
    assert f"PathModified={home}/logs/" in directives(generated[str(unit_dir / "bxmem-decide.path")])
    assert f"PathModified={home}/memory/journal.jsonl" in directives(generated[str(unit_dir / "bxmem-mirror.path")])
    assert f"PathChanged={home}/memory/honcho.jsonl" in directives(generated[str(unit_dir / "bxmem-send.path")])


def test_the_units_are_told_what_the_owner_s_shell_named(owner, tmp_path, monkeypatch):
    """A unit has none of the owner's environment: what moved the configuration or the
    home here goes into Environment=, and nothing when the defaults are the same."""
    home = owner / ".local" / "share" / "boxmaker"
    moved = tmp_path / "elsewhere.toml"
    shutil.copy(owner / ".config" / "boxmaker" / "bxmem.toml", moved)
    monkeypatch.setenv("BXMEM_CONFIG", str(moved))
    service = next(text for path, text in printed().items() if path.endswith("bxmem-send.service"))
    assert f"Environment=BXMEM_CONFIG={moved}" in directives(service)
    assert not [
        line for line in directives(service) if line.startswith("Environment=BOXMAKER_HOME")
    ]  # the file names it
    other_home = tmp_path / "other-home"
    other_home.mkdir()
    monkeypatch.setenv("BOXMAKER_HOME", str(other_home))
    service = next(text for path, text in printed().items() if path.endswith("bxmem-send.service"))
    assert f"Environment=BOXMAKER_HOME={other_home}" in directives(service)
    assert f"ReadWritePaths={other_home}" in directives(service)
    monkeypatch.chdir(tmp_path)  # named relative to where the command runs: the units are told where that is
    monkeypatch.setenv("BXMEM_CONFIG", moved.name)
    monkeypatch.setenv("BOXMAKER_HOME", other_home.name)
    service = next(text for path, text in printed().items() if path.endswith("bxmem-send.service"))
    assert {f"Environment=BXMEM_CONFIG={moved}", f"Environment=BOXMAKER_HOME={other_home}"} <= set(directives(service))
    monkeypatch.delenv("BXMEM_CONFIG")
    monkeypatch.setenv("BOXMAKER_HOME", str(home))  # the same home the file names: nothing to tell
    service = next(text for path, text in printed().items() if path.endswith("bxmem-send.service"))
    assert not [line for line in directives(service) if line.startswith("Environment=")]
    monkeypatch.delenv("BOXMAKER_HOME")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(owner / ".config"))  # the default spelled out: the same file
    service = next(text for path, text in printed().items() if path.endswith("bxmem-send.service"))
    assert not [line for line in directives(service) if line.startswith("Environment=")]


def test_system_units_run_as_the_user_who_ran_sudo(owner, monkeypatch, tmp_path):
    monkeypatch.setattr(units.os, "geteuid", lambda: 0)
    monkeypatch.setattr(units.pwd, "getpwnam", lambda name: as_user(owner, name))
    monkeypatch.setenv("SUDO_USER", "kyle")
    monkeypatch.setenv("HOME", "/root")  # as sudo sets it
    monkeypatch.setenv("XDG_CONFIG_HOME", "/root/.config")
    generated = printed("--system")
    assert sorted(generated) == [f"/etc/systemd/system/{name}" for name in TEMPLATES]
    service = generated["/etc/systemd/system/bxmem-decide.service"]
    assert "\n[Service]\nUser=kyle\n" in service
    assert f"ReadWritePaths={owner}/.local/share/boxmaker" in directives(service)
    monkeypatch.delenv("SUDO_USER")  # root without sudo: whose units would they be?
    refused = bxmem_inprocess("units", "install", "--system")
    assert refused.returncode == 6 and "run it with sudo from the account the jobs run as" in refused.stderr
    monkeypatch.setattr(units.os, "geteuid", lambda: 1000)  # a user previews them: its own
    monkeypatch.setenv("HOME", str(owner))
    preview = printed("--system")
    assert (
        f"\n[Service]\nUser={units.pwd.getpwuid(os.getuid()).pw_name}\n"
        in preview["/etc/systemd/system/bxmem-decide.service"]
    )
    assert bxmem_inprocess("units", "install", "--system").returncode == 6
    both = bxmem_inprocess("units", "print", "--user", "--system")
    assert (both.returncode, both.stderr) == (2, "bxmem: error: units: --user or --system, not both\n")


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd-analyze is not installed")
@pytest.mark.parametrize("scope", ["user", "system"])
def test_the_generated_units_are_valid_units(owner, monkeypatch, tmp_path, scope):
    if scope == "system":
        import pwd

        monkeypatch.setattr(units.os, "geteuid", lambda: 0)
        name = pwd.getpwuid(os.getuid()).pw_name  # User= must name a user systemd-analyze can find
        monkeypatch.setattr(units.pwd, "getpwnam", lambda _name: as_user(owner, name))
        monkeypatch.setenv("SUDO_USER", "someone")
    out = tmp_path / "units"
    out.mkdir()
    for path, text in printed(f"--{scope}").items():
        (out / Path(path).name).write_text(text)
    verify = subprocess.run(
        ["systemd-analyze", "verify", *(str(p) for p in sorted(out.iterdir()))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert verify.returncode == 0 and not verify.stderr.strip(), verify.stderr


def test_install_writes_enables_and_uninstall_removes_exactly_what_it_wrote(owner):
    unit_dir = owner / ".config" / "systemd" / "user"
    unit_dir.mkdir(parents=True)
    (unit_dir / "bxmem-send.service").write_text("# copied by hand, as the README once said\n")
    (unit_dir / "bxmem-send.service.d").mkdir()
    (unit_dir / "bxmem-send.service.d" / "mine.conf").write_text("[Service]\nNice=5\n")
    (unit_dir / "other.service").write_text("[Service]\nExecStart=/bin/true\n")
    result = bxmem_inprocess("units", "install")
    assert result.returncode == 0, result.stderr
    timers_and_paths = [n for n in TEMPLATES if n.endswith((".timer", ".path")) and "metrics" not in n]
    optional = [n for n in TEMPLATES if n.endswith((".timer", ".path")) and n not in timers_and_paths]
    assert asked(owner) == ["--user daemon-reload", f"--user enable --now {' '.join(timers_and_paths)}"]
    assert f"wrote {unit_dir / 'bxmem-send.service'} (replacing the one there)" in result.stdout.splitlines()
    assert f"enabled and started: {' '.join(timers_and_paths)}" in result.stdout.splitlines()
    if (
        optional
    ):  # written, for `systemctl enable` or units install --optional; not started on a host without node_exporter
        assert (
            f"written, not enabled (optional; units install --optional enables them too): {' '.join(optional)}"
            in result.stdout.splitlines()
        )
    installed = sorted(p.name for p in unit_dir.iterdir() if p.is_file())
    assert installed == sorted([*TEMPLATES, "other.service"])
    assert all(oct((unit_dir / n).stat().st_mode & 0o777) == "0o644" for n in TEMPLATES)
    assert printed() == {str(unit_dir / n): (unit_dir / n).read_text() for n in TEMPLATES}
    manifest = json.loads((owner / ".local" / "state" / "bxmem" / "units.json").read_text())
    assert sorted(Path(f["path"]).name for f in manifest["files"]) == TEMPLATES

    again = bxmem_inprocess("units", "install")  # an upgrade: written anew, enabled again
    assert again.returncode == 0 and asked(owner)[2:] == asked(owner)[:2]

    (unit_dir / "bxmem-mirror.timer").write_text((unit_dir / "bxmem-mirror.timer").read_text() + "# edited\n")
    (unit_dir / "bxmem-decide.path").unlink()
    gone = bxmem_inprocess("units", "uninstall")
    assert gone.returncode == 0, gone.stderr
    assert asked(owner)[4:6] == [f"--user disable --now {' '.join(timers_and_paths)}", "--user daemon-reload"]
    assert f"removed {unit_dir / 'bxmem-mirror.timer'} (changed since it was installed)" in gone.stdout.splitlines()
    assert f"already gone: {unit_dir / 'bxmem-decide.path'}" in gone.stdout.splitlines()
    left = sorted(str(p.relative_to(unit_dir)) for p in unit_dir.rglob("*"))
    assert left == ["bxmem-send.service.d", "bxmem-send.service.d/mine.conf", "other.service"]  # the owner's stay
    assert not (owner / ".local" / "state" / "bxmem" / "units.json").exists()
    nothing = bxmem_inprocess("units", "uninstall")
    assert (nothing.returncode, nothing.stdout) == (0, "no units installed by bxmem units install: nothing to remove\n")


def test_a_template_gone_in_an_upgrade_is_removed_by_the_next_install(owner, monkeypatch):
    assert bxmem_inprocess("units", "install").returncode == 0
    unit_dir = owner / ".config" / "systemd" / "user"
    shipped = units.templates()
    monkeypatch.setattr(units, "templates", lambda: {k: v for k, v in shipped.items() if "mirror" not in k})
    result = bxmem_inprocess("units", "install")
    assert result.returncode == 0
    assert f"removed {unit_dir / 'bxmem-mirror.path'} (an earlier install's, no template now)" in result.stdout
    assert not (unit_dir / "bxmem-mirror.service").exists()


def test_install_needs_the_home_the_units_name(owner):
    home = owner / ".local" / "share" / "boxmaker"
    shutil.rmtree(home)
    result = bxmem_inprocess("units", "install")
    assert result.returncode == 6 and result.stderr == (
        f"bxmem: error: the Boxmaker home {home} does not exist: bxmem init makes it (the units' ReadWritePaths= "
        "needs it)\n"
    )
    assert not (owner / ".config" / "systemd").exists() and asked(owner) == []


def test_a_path_a_unit_cannot_hold_as_it_is_is_refused(owner, tmp_path, monkeypatch):
    spaced = tmp_path / "my home"
    spaced.mkdir()
    monkeypatch.setenv("BOXMAKER_HOME", str(spaced))
    result = bxmem_inprocess("units", "print")
    assert result.returncode == 6 and "cannot be written into a unit as it is" in result.stderr


def test_a_template_naming_h_where_bxmem_puts_nothing_is_refused_not_guessed(owner, monkeypatch):
    monkeypatch.setattr(units, "templates", lambda: {"bxmem-x.service": "[Service]\nExecStart=%h/bin/other\n"})
    result = bxmem_inprocess("units", "print")
    assert result.returncode == 1 and "names %h where bxmem does not know what to put" in result.stderr


def test_a_systemctl_that_fails_is_one_line(owner, monkeypatch, tmp_path):
    failing = tmp_path / "bin" / "systemctl"
    failing.write_text('#!/bin/sh\necho "Failed to connect to bus: No medium found" >&2\nexit 1\n')
    result = bxmem_inprocess("units", "install")
    assert result.returncode == 1
    assert result.stderr == (
        "bxmem: error: systemctl --user daemon-reload: Failed to connect to bus: No medium found "
        "(no user manager: log in, or `sudo loginctl enable-linger $USER`, or use --system)\n"
    )


def test_the_optional_timers_are_enabled_when_asked(owner):
    result = bxmem_inprocess("units", "install", "--optional")
    assert result.returncode == 0, result.stderr
    every = [n for n in TEMPLATES if n.endswith((".timer", ".path"))]
    assert asked(owner)[-1] == f"--user enable --now {' '.join(every)}"
    assert bxmem_inprocess("units", "uninstall").returncode == 0
    assert f"--user disable --now {' '.join(every)}" in asked(owner)
