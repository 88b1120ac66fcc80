"""Homes built from scratch for each case, and the Honcho they talk to.

An Agent is one Boxmaker home: loopd logs, memoryd's journal, a stub brokerd
on a real Unix socket, a bxmem.toml (with one key file per workspace when the
server has auth on), and the real CLI run as subprocesses against it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from fake_honcho import FakeHoncho  # noqa: E402

from bxmem.demo.brokerd import StubBrokerd  # noqa: E402

OWNER = "kyle"


class Backend:
    """The fake Honcho (one per case, fresh) or a real server (one per run,
    workspace names made unique by a run id, since it keeps its data)."""

    def __init__(
        self,
        kind: str,
        url: str | None = None,
        admin_jwt: str | None = None,
        keys_dir: Path | None = None,
        run_id: str = "",
    ) -> None:
        self.kind = kind  # fake | fake-auth | real | real-auth
        self.url = url
        self.admin_jwt = admin_jwt
        self.keys_dir = keys_dir
        self.run_id = run_id
        self.fake: FakeHoncho | None = None
        self.case = ""
        self.force_auth = False  # a case that needs keys on the fake too

    @property
    def real(self) -> bool:
        return self.kind.startswith("real")

    @property
    def auth(self) -> bool:
        return self.kind.endswith("auth") or self.force_auth

    def start_case(self, case: str, auth: bool = False) -> None:
        self.case = case
        self.force_auth = auth and not self.real
        if not self.real:
            self.fake = FakeHoncho().start()
            self.url = self.fake.url

    def end_case(self) -> None:
        if self.fake is not None:
            self.fake.stop()
            self.fake = None

    def ws(self, name: str) -> str:
        """A workspace name unique to this run and case."""
        return f"{name}-{self.case}-{self.run_id}" if self.run_id else f"{name}-{self.case}"

    def key_for(self, workspace: str) -> str:
        """A key for one workspace: registered with the fake, minted on the real server,
        or read from the keys directory."""
        if self.fake is not None:
            key = self.fake.keys.get(workspace) or f"eval-key-{workspace}"
            self.fake.keys[workspace] = key
            return key
        if self.keys_dir is not None and (self.keys_dir / f"{workspace}.key").exists():
            return (self.keys_dir / f"{workspace}.key").read_text().strip()
        if not self.admin_jwt:
            raise RuntimeError(
                f"no key for {workspace}: set BXMEM_EVAL_HONCHO_ADMIN_JWT or put {workspace}.key in the keys dir"
            )
        request = urllib.request.Request(
            f"{self.url}/v3/keys?workspace_id={workspace}",
            method="POST",
            headers={"Authorization": f"Bearer {self.admin_jwt}"},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["key"]


@dataclass
class Run:
    argv: list[str]
    code: int
    stdout: str
    stderr: str
    seconds: float


@dataclass
class Agent:
    name: str
    root: Path
    backend: Backend
    reads: list[dict] = field(default_factory=list)  # [[honcho.read]]: agent, workspace, trust, class, key?
    honcho_url: str | None = None  # overrides the backend's (a dead or silent server)
    states: dict[str, tuple[str, bool]] = field(default_factory=dict)
    runs: list[Run] = field(default_factory=list)
    no_key: set[str] = field(default_factory=set)  # read agents configured without a key
    artifacts: bool = False  # [artifacts] on

    def __post_init__(self) -> None:
        self.home = self.root / "home"
        (self.home / "logs").mkdir(parents=True, exist_ok=True)
        (self.home / "memory").mkdir(parents=True, exist_ok=True)
        self.config = self.root / "bxmem.toml"
        self.brokerd = StubBrokerd(self.home / "run" / "memory-broker" / "state.sock", self.states).start()
        self.journal_n = 0
        self.write_config()

    # --- the home ---------------------------------------------------------------------

    @property
    def trusted(self) -> str:
        return self.backend.ws(f"{self.name}-trusted")

    @property
    def untrusted(self) -> str:
        return self.backend.ws(f"{self.name}-untrusted")

    @property
    def fleet(self) -> str:
        return self.backend.ws("fleet")

    def write_config(self) -> None:
        url = self.honcho_url or self.backend.url
        text = (
            f'[paths]\nhome = "{self.home}"\n\n[honcho]\nurl = "{url}"\nagent = "{self.name}"\nowner = "{OWNER}"\n'
            f'trusted = "{self.trusted}"\nuntrusted = "{self.untrusted}"\nfleet = "{self.fleet}"\n'
        )
        for source in self.reads:
            text += (
                f'\n[[honcho.read]]\nagent = "{source["agent"]}"\nworkspace = "{source["workspace"]}"\n'
                f'trust = "{source.get("trust", "untrusted")}"\n'
            )
        if self.backend.auth:
            keys = self.root / "keys"
            keys.mkdir(exist_ok=True, mode=0o700)
            named = {"honcho_trusted": self.trusted, "honcho_untrusted": self.untrusted, "honcho_fleet": self.fleet}
            named |= {f"honcho_read_{s['agent']}": s["workspace"] for s in self.reads if s["agent"] not in self.no_key}
            for secret, workspace in named.items():
                path = keys / f"{secret}.key"
                if not path.exists():
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    os.write(fd, (self.backend.key_for(workspace) + "\n").encode())
                    os.close(fd)
                text += f'\n[secrets.{secret}]\nfile = "{path}"\n'
        if self.artifacts:
            text += "\n[artifacts]\n"
        self.config.write_text(text)
        # A changed URL must not be served from the validated-config cache.
        for cached in (self.home / "memory" / "bxmem").glob("config.marshal"):
            cached.unlink()

    def session(self, session: str, lines: list[dict], state: tuple[str, bool] = ("private", False)) -> None:
        self.states[session] = state
        self.brokerd.states[session] = state
        with open(self.home / "logs" / f"{session}.jsonl", "a") as f:
            for line in lines:
                f.write(json.dumps(line) + "\n")

    def journal(self, op: str, session: str = "s-mem", ts: str = "2026-09-27T10:00:00Z", **fields) -> str:
        self.journal_n += 1
        edit_id = f"j-{self.journal_n:04d}"
        with open(self.home / "memory" / "journal.jsonl", "a") as f:
            f.write(json.dumps({"id": edit_id, "ts": ts, "session": session, "op": op, **fields}) + "\n")
        return edit_id

    def export(self, session: str, name: str, data: bytes) -> None:
        """A file a tool of `session` wrote into its exports/ folder (loopd makes it, mode 0700)."""
        folder = self.home / "sessions" / session / "exports"
        folder.mkdir(parents=True, exist_ok=True)
        os.chmod(folder, 0o700)
        (folder / name).write_bytes(data)

    def record(self, session: str, name: str, *options: str) -> Run:
        """`bxmem artifact record` as the host runs it for the model: the session is the host's."""
        return self.cli("artifact", "record", "--session", session, "--json", "--", name, *options)

    def resolve(self, ident: str, *options: str) -> Run:
        return self.cli("artifact", "resolve", "--session", "s-later", "--json", "--", ident, *options)

    def stop(self) -> None:
        self.brokerd.stop()

    # --- the real CLI -----------------------------------------------------------------

    def cli(self, *args: str, timeout: float = 300) -> Run:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("HONCHO_", "BXMEM_EVAL"))}
        env.update(BOXMAKER_HOME=str(self.home), BXMEM_CONFIG=str(self.config))
        argv = [sys.executable, "-m", "bxmem", *args]
        start = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=timeout, cwd=ROOT)
        run = Run(list(args), done.returncode, done.stdout, done.stderr, time.monotonic() - start)
        self.runs.append(run)
        return run

    def sync(self, send: bool = True) -> None:
        """decide, mirror, then send until the outbox is empty."""
        self.cli("decide", "--json")
        self.cli("mirror", "--json")
        if not send:
            return
        for _ in range(50):
            run = self.cli("send", "--json")
            try:
                report = json.loads(run.stdout)
            except ValueError:
                raise RuntimeError(
                    f"{self.name}: send printed no JSON (exit {run.code}): {run.stderr[-300:]}"
                ) from None
            if report.get("failed"):
                raise RuntimeError(f"{self.name}: send failed {report['failed']} item(s): {run.stderr[-300:]}")
            if report.get("outage"):
                raise RuntimeError(f"{self.name}: send saw Honcho down: {run.stderr[-300:]}")
            if not report.get("pending"):
                return
        raise RuntimeError(f"{self.name}: the outbox did not drain")

    def undo(self, edit_id: str) -> Run:
        return self.cli("undo", "--json", edit_id)


def turn(
    n: int, text: str, reply: str, speaker: str = OWNER, untrusted_result: bool = False, ts: str | None = None
) -> list[dict]:
    """One finished turn as loopd logs it."""
    ts = ts or f"2026-09-27T10:{n % 60:02d}:00Z"
    lines: list[dict] = [{"type": "user", "turn": n, "ts": ts, "speaker": speaker, "text": text}]
    if untrusted_result:
        lines.append(
            {
                "type": "tool_call",
                "turn": n,
                "ts": ts,
                "id": f"c{n}",
                "tool": "fetch",
                "args": {"url": "https://example.org"},
            }
        )
        lines.append(
            {
                "type": "tool_result",
                "turn": n,
                "ts": ts,
                "id": f"c{n}",
                "label": {"untrusted": True, "class": "public"},
                "text": "<page>",
            }
        )
    lines.append({"type": "assistant", "turn": n, "ts": ts, "final": True, "text": reply})
    lines.append({"type": "turn_end", "turn": n, "ts": ts, "status": "completed"})
    return lines
