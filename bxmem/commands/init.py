"""`bxmem init`. What it writes is checked first as every command checks a configuration, so
`bxmem config check` passes on it.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from bxmem.config.loader import Workspace, read_key
from bxmem.config.new_file import is_there, write_new
from bxmem.errors import ConfigInvalid, Refused, UsageError
from bxmem.start import locations
from bxmem.store.paths import make_home
from bxmem.trust.rules import peer_name

#: The key files `--keys DIR` holds, by the [secrets.*] name each goes under (the README's names).
KEY_FILES = {
    "honcho_trusted": "honcho-trusted.key",
    "honcho_untrusted": "honcho-untrusted.key",
    "honcho_fleet": "honcho-fleet.key",
}


@dataclass
class Answers:
    """What the configuration needs, as given (options or prompts). `url` None: local-only."""

    url: str | None
    agent: str | None = None
    owner: str | None = None
    trusted: str | None = None
    untrusted: str | None = None
    fleet: str | None = None
    home: str | None = None
    run: str | None = None
    keys: str | None = None


@dataclass
class Plan:
    config: Path
    home: Path
    text: str
    owner: str | None = None  # the owner's peer id
    owner_said: str | None = None  # the owner as given, when the peer id differs from it
    keys: list[Path] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what the owner should know, said after what was done


def default_agent() -> str:
    """This host's short name as a peer id (`boxmaker0` when it cannot be one)."""
    name = os.uname().nodename.split(".")[0]
    return peer_name(name) or "boxmaker0"


def default_owner() -> str | None:
    return peer_name(os.environ.get("SUDO_USER") or os.environ.get("USER") or os.environ.get("LOGNAME"))


def plan(config: Path, answers: Answers) -> Plan:
    """The file to write and the home to make, every value checked as a job would check it. Nothing is written."""
    from bxmem.config.schema import RESERVED_AGENT_NAMES, check_id, check_url, validate  # deferred: command

    home = Path(os.path.abspath(os.path.expanduser(answers.home or locations.home())))
    run = Path(os.path.abspath(os.path.expanduser(answers.run))) if answers.run else None
    for what, path in (("--home", home), ("--run", run), ("--config", config)):
        if path is not None and any(c in str(path) for c in '"\\\n\r\t'):
            raise UsageError(
                f"init: {what} {str(path)!r}: a path with a quote, backslash or control character "
                "cannot be written into bxmem.toml as it is"
            )
    out = Plan(config=config, home=home, text="")
    shell_home = locations.named_home()
    if shell_home and Path(os.path.abspath(os.path.expanduser(shell_home))) != home:
        out.notes.append(
            f"$BOXMAKER_HOME in this shell names {shell_home}, which wins over the home written here for "
            "every command run with it: unset it, or run bxmem init without --home"
        )
    if answers.url is None:
        out.text = _local_only_text(home, run)
    else:
        missing = [name for name in ("agent", "owner") if not getattr(answers, name)]
        if missing:
            raise UsageError(
                f"init: {' and '.join('--' + m for m in missing)} must be given (off a terminal, init asks nothing)"
            )
        try:
            url = check_url(answers.url)
        except ValueError as exc:
            raise UsageError(f"init: --url {answers.url!r} {exc}") from None
        owner = peer_name(answers.owner)
        if owner is None:
            raise UsageError(
                f"init: --owner {answers.owner!r} is not a name a chat speaker can have (letters, digits, "
                "`.`, `_` and `-`)"
            )
        out.owner, out.owner_said = owner, (answers.owner if owner != answers.owner else None)
        agent = answers.agent or ""
        names = {
            "agent": agent,
            "trusted": answers.trusted or f"{agent}-trusted",
            "untrusted": answers.untrusted or f"{agent}-untrusted",
            "fleet": answers.fleet or "fleet",
        }
        for option, value in names.items():
            try:
                check_id(value)
            except ValueError as exc:
                raise UsageError(f"init: --{option} {value!r} {exc}") from None
        if agent in RESERVED_AGENT_NAMES:
            raise UsageError(f"init: --agent {agent!r} is a name recall or ask gives a source of its own")
        keys = {}
        if answers.keys:
            folder = Path(os.path.abspath(os.path.expanduser(answers.keys)))
            keys = {secret: folder / name for secret, name in KEY_FILES.items()}
            out.keys = _check_keys(keys, names)
        out.text = _honcho_text(home, run, url, owner, names, keys)
    try:
        import tomllib  # deferred: command

        validate(tomllib.loads(out.text), config)
    except ConfigInvalid as exc:  # a value that passed each check above but not the whole: say it, write nothing
        raise UsageError(f"init: {exc}") from None
    return out


def _check_keys(keys: dict[str, Path], names: dict[str, str]) -> list[Path]:
    for secret, path in keys.items():
        if not is_there(path):
            raise Refused(
                f"init: no key file {path} (--keys names a folder holding {', '.join(KEY_FILES.values())}; "
                "each the key of its workspace, one line, mode 600)"
            )
        role = secret.removeprefix("honcho_")
        read_key(Workspace(role, names[role], secret, path))  # KeyFileInvalid: exit 78, naming the file
    return list(keys.values())


def _toml(value: str) -> str:
    return '"' + value + '"'  # checked above: no quote, backslash or control character


def _paths_text(home: Path, run: Path | None) -> str:
    run_line = f"run = {_toml(str(run))}\n" if run else '# run = "/run/user/1000/boxmaker"\n'
    return (
        "[paths]\n"
        "# The Boxmaker home: loopd's logs/, memoryd's memory/journal.jsonl, the ledger\n"
        "# memory/honcho.jsonl and bxmem's own state memory/bxmem/. $BOXMAKER_HOME, when\n"
        "# set, wins over this; the units `bxmem units install` writes find it here.\n"
        f"home = {_toml(str(home))}\n"
        "# Where brokerd's socket is (run/memory-broker/state.sock); default: <home>/run.\n" + run_line
    )


def _header(what: str) -> str:
    return (
        f"# bxmem.toml: written by `bxmem init` on {time.strftime('%Y-%m-%d')}, {what}.\n"
        "# Every key is in docs/config.md; `bxmem config check` shows what this resolves to.\n\n"
    )


def _local_only_text(home: Path, run: Path | None) -> str:
    return (
        _header("local-only")
        + _paths_text(home, run)
        + "\n# No [honcho] section: local-only. Every job runs and records its decisions, and\n"
        "# nothing is sent; what is decided while local-only is never sent later. To send,\n"
        "# add the section (docs/config.md), or move this file away and run bxmem init again.\n"
        "# [honcho]\n"
        '# url = "http://honcho.example:8000"\n'
        '# agent = "boxmaker0"\n'
        '# owner = "kyle"\n'
        '# trusted = "boxmaker0-trusted"\n'
        '# untrusted = "boxmaker0-untrusted"\n'
        '# fleet = "fleet"\n'
    )


def _honcho_text(
    home: Path, run: Path | None, url: str, owner: str, names: dict[str, str], keys: dict[str, Path]
) -> str:
    if keys:
        secrets = (
            "# The workspaces' keys (the server has auth on): each a file of yours, mode 600, one\n"
            "# line; sent to its own workspace only, never logged.\n"
            + "".join(f"[secrets.{secret}]\nfile = {_toml(str(path))}\n" for secret, path in keys.items())
        )
    else:
        secrets = (
            "# Keys, when the server has auth on: one file per workspace, each of yours, mode 600,\n"
            "# one line (a partial set is used as written; config check warns about it).\n"
            + "".join(
                f'# [secrets.{secret}]\n# file = "~/.config/boxmaker/{name}"\n' for secret, name in KEY_FILES.items()
            )
        )
    return (
        _header(f"for the agent {names['agent']}") + _paths_text(home, run) + "\n[honcho]\n"
        f"url = {_toml(url)}\n"
        f"agent = {_toml(names['agent'])}  # this agent's peer in Honcho (never observed)\n"
        f"owner = {_toml(owner)}  # the owner's peer, the same in every workspace\n"
        f"trusted = {_toml(names['trusted'])}  # clean turns, identity entries, trusted notes\n"
        f"untrusted = {_toml(names['untrusted'])}  # turns of sessions that read something from outside\n"
        f"fleet = {_toml(names['fleet'])}  # untrusted notes, shared with the fleet's other agents\n"
        "\n# Another agent's workspace this agent reads (recall, ask -w AGENT): optional, repeatable.\n"
        "# [[honcho.read]]\n"
        '# agent = "boxmaker1"\n'
        '# workspace = "boxmaker1-trusted"\n'
        '# trust = "trusted"  # its hits are memory; "untrusted" (the default) taints the session\n'
        "\n" + secrets + "\n[send]\n"
        "# batch = 1000  # items a `bxmem send` run sends (at most 10,000)\n"
    )


@dataclass
class Done:
    plan: Plan
    made: list[Path]
    existed: list[Path]

    def lines(self, next_steps: list[tuple[str, str]]) -> list[str]:
        p = self.plan
        out = [f"wrote {p.config} (mode 600)"]
        if p.owner_said:
            out.append(
                f"the owner {p.owner_said!r} is the peer {p.owner!r} in Honcho, as a chat speaker of that name is"
            )
        out += [f"made {path} (mode 700)" for path in self.made]
        out += [f"{path} was there: left as it is" for path in self.existed]
        out += [f"note: {note}" for note in p.notes]
        width = max(len(command) for command, _ in next_steps)
        return [*out, "next:", *(f"  {command:{width}}  {what}" for command, what in next_steps)]


def run(plan_: Plan) -> Done:
    """Make the home, then write the configuration where none is (never over one,
    even one that appears meanwhile)."""
    if is_there(plan_.config):
        write_new(plan_.config, plan_.text)  # says it: nothing is made
    made, existed = make_home(plan_.home)
    write_new(plan_.config, plan_.text)
    return Done(plan_, made, existed)
