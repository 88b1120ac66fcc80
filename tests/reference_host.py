"""A reference agent host, written from docs/agent-tools.md alone (its section
numbers are cited): what a host does to offer bxmem's tools to a model, run
them and label their results. tests/test_reference_host.py runs it against the
real CLI. It imports nothing of bxmem's: it knows bxmem only as a command.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
from dataclasses import dataclass, field

import jsonschema

NOTHING_READ = {"untrusted": False, "class": "public"}  # section 5: exits 2, 6, 78, and the host's own refusals
FAIL_CLOSED = {"untrusted": True, "class": "secret"}  # section 5: anything else
TIMEOUTS = {"recall": 15.0, "ask_memory": 165.0, "artifact_record": 120.0, "artifact_resolve": 60.0}  # section 4
KILL_AFTER = 2.0  # section 4: SIGTERM, then SIGKILL this much later
DOCUMENT_EXITS = (0, 7)
NOTHING_READ_EXITS = (2, 6, 78)
SCHEMA_OF = {
    "recall": "recall",
    "ask_memory": "ask",
    "artifact_record": "artifact-record",
    "artifact_resolve": "artifact-resolve",
}
ARTIFACT_LINE_EXITS = (2, 5, 6, 8)  # section 8: the one line goes to the model, labelled as nothing read
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass
class ToolResult:
    content: str
    label: dict
    is_error: bool
    exit: int | None = None  # bxmem's exit status (negative: the signal that ended it); None: not run
    log: list[str] = field(default_factory=list)  # for the host's own logs, never the model


class Host:
    def __init__(self, bxmem: list[str], env: dict[str, str], timeouts: dict[str, float] | None = None) -> None:
        self.bxmem = list(bxmem)  # the command, e.g. ["/home/kyle/.local/bin/bxmem"]
        self.env = dict(env)  # section 1: the timer jobs' user and environment
        self.timeouts = {**TIMEOUTS, **(timeouts or {})}
        self._tools: list[dict] | None = None
        self._schemas: dict[str, dict] = {}
        self.running: subprocess.Popen | None = None  # the bxmem process of the call in progress

    # --- section 2: the tools array -------------------------------------------------

    def tools(self) -> list[dict]:
        """`bxmem tools` as it prints it; run again after bxmem.toml changes (`refresh`)."""
        if self._tools is None:
            done = self._run(["tools"], 30.0)
            if done.returncode != 0:
                raise RuntimeError(f"bxmem tools exited {done.returncode}: {done.stderr.strip()}")
            self._tools = json.loads(done.stdout)
        return self._tools

    def refresh(self) -> None:
        self._tools, self._schemas = None, {}

    def schema(self, tool: str) -> dict:
        """Section 6: the schema of the installed bxmem, never a copy."""
        name = SCHEMA_OF[tool]
        if name not in self._schemas:
            done = self._run(["schema", name], 30.0)
            if done.returncode != 0:
                raise RuntimeError(f"bxmem schema {name} exited {done.returncode}: {done.stderr.strip()}")
            self._schemas[name] = json.loads(done.stdout)
        return self._schemas[name]

    # --- section 3: from a tool call to argv ---------------------------------------------

    @staticmethod
    def clean(text: str) -> str:
        return _LONE_SURROGATE.sub("\ufffd", text.replace("\x00", ""))

    def argv(self, tool: str, call: dict, session: str | None = None) -> list[str]:
        if tool == "artifact_record":  # section 3: the session is the host's, never the model's
            argv = [
                "artifact",
                "record",
                "--session",
                str(session),
                "--json",
                "--",
                self.clean(call["file"]),
                "--summary",
                self.clean(call["summary"]),
            ]
            if "title" in call:
                argv += ["--title", self.clean(call["title"])]
            for tag in call.get("tags", []):
                argv += ["--tag", self.clean(tag)]
            if "source_version" in call:
                argv += ["--source-version", self.clean(call["source_version"])]
            return argv
        if tool == "artifact_resolve":
            argv = ["artifact", "resolve", "--session", str(session), "--json", "--", self.clean(call["id"])]
            return argv + (["--source-version", self.clean(call["source_version"])] if "source_version" in call else [])
        if tool == "recall":
            return ["recall", "--json", "-k", str(call.get("k", 8)), "--", self.clean(call["query"])]
        argv = ["ask", "--json"]
        for name in call.get("workspaces", []):
            argv += ["-w", self.clean(name)]
        if "reasoning" in call:
            argv += ["--reasoning", call["reasoning"]]
        return [*argv, "--", self.clean(call["question"])]

    # --- sections 4 and 5: running it, reading the result ----------------------------------

    def call(self, tool: str, call: dict, session: str | None = None) -> ToolResult:
        """`session`: the id of the session the call was made in (the host knows it)."""
        offered = {t["name"]: t for t in self.tools()}
        if tool not in offered:
            return ToolResult(f"there is no tool {tool!r}", NOTHING_READ, True)
        problems = sorted(jsonschema.Draft202012Validator(offered[tool]["input_schema"]).iter_errors(call), key=str)
        if problems:
            where = "/".join(str(p) for p in problems[0].absolute_path) or "input"
            return ToolResult(f"invalid input for {tool}: {where}: {problems[0].message}", NOTHING_READ, True)
        argv = self.argv(tool, call, session)
        done = self._run(argv, self.timeouts[tool])
        return self.result(tool, done)

    def result(self, tool: str, done: subprocess.CompletedProcess) -> ToolResult:
        code, log = done.returncode, [done.stderr] if done.stderr else []
        if code in DOCUMENT_EXITS:
            document = self._document(tool, done.stdout)
            if document is not None:
                return ToolResult(document["text"], document["label"], False, code, log)
        elif (code in ARTIFACT_LINE_EXITS and tool.startswith("artifact_")) or code == 2:  # section 8
            lines = done.stderr.splitlines()
            if len(lines) == 1 and lines[0].startswith("bxmem: error: "):
                return ToolResult(lines[0], NOTHING_READ, True, code, log)
        elif code in NOTHING_READ_EXITS:
            return ToolResult(f"the {tool} tool is unavailable (bxmem exit {code})", NOTHING_READ, True, code, log)
        what = f"killed by signal {-code}" if code < 0 else f"exit {code}"
        return ToolResult(f"the {tool} tool failed (bxmem {what})", FAIL_CLOSED, True, code, log)

    def _document(self, tool: str, stdout: str) -> dict | None:
        try:
            data = json.loads(stdout)
        except ValueError:
            return None
        validator = jsonschema.Draft202012Validator(self.schema(tool))
        return data if validator.is_valid(data) else None

    def _run(self, args: list[str], timeout: float) -> subprocess.CompletedProcess:
        process = subprocess.Popen(
            [*self.bxmem, *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=self.env,
            text=True,
            encoding="utf-8",
            errors="surrogateescape",
        )
        self.running = process  # for tests that signal it
        try:
            out, err = process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.send_signal(signal.SIGTERM)
            try:
                out, err = process.communicate(timeout=KILL_AFTER)
            except subprocess.TimeoutExpired:
                process.kill()
                out, err = process.communicate()
        return subprocess.CompletedProcess(process.args, process.returncode, out, err)
