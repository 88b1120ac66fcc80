"""`./dev eval [--fast] [--honcho URL] [--honcho-auth URL]`: run the corpus, print
the table, store the results (no conversation text), exit 1 when a gate fails.

Backends: the fake Honcho (tests/fake_honcho.py, fresh for each case) unless a
real server is named, by flag or environment:
  BXMEM_EVAL_HONCHO_URL         a real server with auth off
  BXMEM_EVAL_HONCHO_AUTH_URL    a real server with auth on; keys per workspace from
  BXMEM_EVAL_KEYS_DIR           <workspace>.key files, or minted with the admin token in
  BXMEM_EVAL_HONCHO_ADMIN_JWT   (a file holding it)
A real server keeps its data: every workspace name carries this run's id.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

from . import cases as memory_cases
from . import cases_artifacts as artifact_cases
from . import cases_retrieval as retrieval_cases
from .corpus import Case, Ctx
from .homes import ROOT, Backend

# id, function, title, what must be found, what must not be
CASES = [
    (
        "01",
        memory_cases.c01_preference,
        "owner preference",
        "in a later session; by a reader of the trusted ws",
        "by an agent not reading it",
    ),
    (
        "02",
        memory_cases.c02_tainted,
        "untrusted session",
        "as memory-tainted, label untrusted; clean as memory",
        "tainted fact as memory, or in trusted ws",
    ),
    (
        "03",
        memory_cases.c03_replace,
        "replaced identity",
        "new text as identity, locally and in Honcho",
        "old text, locally or in conclusions",
    ),
    (
        "04",
        memory_cases.c04_undo,
        "undone edits",
        "fleet note beside its retraction",
        "undone entry, locally or in Honcho",
    ),
    (
        "05",
        memory_cases.c05_injection,
        "stored injection",
        "turn, note, fleet message, labelled",
        "invisible chars, fence imitation, forged hits",
    ),
    ("06", memory_cases.c06_secret, "secret text", "clean turn through Honcho", "secret session or key in any output"),
    (
        "07",
        retrieval_cases.c07_absent,
        "evidence absent",
        "the fact where it was said",
        "any hit for the never-said; near misses",
    ),
    (
        "08",
        retrieval_cases.c08_down,
        "Honcho down",
        "local hits in time; each source named",
        "Honcho hits; answers from ask",
    ),
    ("09", retrieval_cases.c09_long, "long history", "planted fact; median/p95 wall", "any output over its bounds"),
    (
        "10",
        retrieval_cases.c10_two_agents,
        "two agents",
        "each other's fleet note, tainted, named",
        "the other's trusted turns (unless read)",
    ),
    (
        "11",
        retrieval_cases.c11_ask,
        "ask",
        "each ws named, labelled; peers named",
        "unknown ws asked; keyless ws as bad input",
    ),
    (
        "12",
        retrieval_cases.c12_supersede,
        "correction supersedes",
        "new entry first; old text dated",
        "old text as identity",
    ),
    (
        "13",
        artifact_cases.c13_found_later,
        "artifact found later",
        "card in a later session; exact bytes, fresh/stale",
        "by an agent not reading it",
    ),
    (
        "14",
        artifact_cases.c14_other_agent,
        "another agent's card",
        "in ea's trusted ws, tainted, bytes elsewhere",
        "resolved there; tainted/secret cards",
    ),
    (
        "15",
        artifact_cases.c15_corrupt,
        "corrupt artifact",
        "exit 8 each; verify names them; re-record repairs",
        "a path or bytes for any",
    ),
    (
        "16",
        artifact_cases.c16_card_injection,
        "card injection",
        "card found, labelled; planted lines shown",
        "fence imitation, forged hits",
    ),
]
AUTH_CASES = {"11"}  # run with keys on the fake too: "no key" needs a server that wants keys


def run_case(backend: Backend, spec, fast: bool, tmp: Path) -> Case:
    cid, fn, title, finds, refuses = spec
    case = Case(cid, title, finds, refuses)
    backend.start_case(f"c{cid}", auth=cid in AUTH_CASES)
    ctx = Ctx(backend, tmp / f"c{cid}", fast, case)
    start = time.monotonic()
    try:
        fn(ctx)
    except Exception as exc:  # a case that cannot run fails; the next one still runs
        case.error = f"{type(exc).__name__}: {str(exc).split(':', 1)[0][:120]}"
        print(f"case {cid}: {traceback.format_exc(limit=3)}", file=sys.stderr)
    finally:
        ctx.close()
        backend.end_case()
        case.seconds = round(time.monotonic() - start, 2)
    return case


def _short(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def table(label: str, cases: list[Case]) -> str:
    rows = [f"== {label}", f"{'case':<24} {'must find':<46} {'must not':<42} {'result':<7} figures"]
    for c in cases:
        passed = sum(1 for x in c.checks if x.ok)
        result = "PASS" if c.passed else "FAIL"
        figures = ", ".join(f"{k}={v}" for k, v in c.figures.items())
        rows.append(
            f"{c.id + ' ' + c.title:<24} {_short(c.finds, 46):<46} {_short(c.refuses, 42):<42} {result:<7} "
            f"{passed}/{len(c.checks)} checks, {c.seconds:.1f} s" + (f", {figures}" if figures else "")
        )
        for x in c.checks:
            if not x.ok:
                rows.append(f"{'':<24}   failed {x.side} {x.what}" + (f" ({x.why})" if x.why else ""))
        if c.error:
            rows.append(f"{'':<24}   error: {c.error}")
    return "\n".join(rows)


def gates(cases: list[Case]) -> dict:
    checks = [x for c in cases for x in c.checks]
    return {
        "every case 100 %": all(c.passed for c in cases),
        "zero cross-agent/workspace leakage": not [x for x in checks if x.gate == "leak" and not x.ok],
        "every output within its bounds": not [x for x in checks if x.gate == "bound" and not x.ok],
    }


def backends(args, run_id: str) -> list[tuple[str, Backend]]:
    out = []
    url = args.honcho or os.environ.get("BXMEM_EVAL_HONCHO_URL")
    auth = args.honcho_auth or os.environ.get("BXMEM_EVAL_HONCHO_AUTH_URL")
    if url:
        out.append((f"real Honcho, auth off ({url})", Backend("real", url.rstrip("/"), run_id=run_id)))
    if auth:
        jwt_file = os.environ.get("BXMEM_EVAL_HONCHO_ADMIN_JWT")
        keys = os.environ.get("BXMEM_EVAL_KEYS_DIR")
        out.append(
            (
                f"real Honcho, auth on ({auth})",
                Backend(
                    "real-auth",
                    auth.rstrip("/"),
                    admin_jwt=Path(jwt_file).read_text().strip() if jwt_file else None,
                    keys_dir=Path(keys) if keys else None,
                    run_id=run_id,
                ),
            )
        )
    return out or [("fake Honcho (tests/fake_honcho.py)", Backend("fake"))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="./dev eval", description=__doc__.split("\n\n")[0])
    parser.add_argument("--fast", action="store_true", help="the CI version: a 2,000-turn history, no 150 s ask wait")
    parser.add_argument("--honcho", metavar="URL", help="a real Honcho with auth off")
    parser.add_argument("--honcho-auth", metavar="URL", help="a real Honcho with auth on (keys: see above)")
    parser.add_argument("--case", action="append", default=[], metavar="ID", help="run only these cases (01..16)")
    parser.add_argument(
        "--results", metavar="DIR", default=str(ROOT / "eval" / "results"), help="where to store the JSON"
    )
    args = parser.parse_args(argv)
    run_id = time.strftime("%m%d%H%M%S")
    chosen = [s for s in CASES if not args.case or s[0] in {c.zfill(2) for c in args.case}]
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    report = {"run": run_id, "commit": commit, "fast": args.fast, "machine": os.uname().nodename, "backends": []}
    ok = True
    tmp = Path(tempfile.mkdtemp(prefix="bxeval-"))
    try:
        for label, backend in backends(args, run_id):
            start = time.monotonic()
            cases = [run_case(backend, spec, args.fast, tmp / backend.kind) for spec in chosen]
            print(table(label, cases))
            met = gates(cases)
            for gate, passed in met.items():
                print(f"gate: {gate}: {'met' if passed else 'NOT MET'}")
            print(f"({time.monotonic() - start:.1f} s, commit {commit})\n")
            ok = ok and all(met.values())
            report["backends"].append(
                {
                    "backend": backend.kind,
                    "gates": met,
                    "seconds": round(time.monotonic() - start, 1),
                    "cases": [
                        {
                            "id": c.id,
                            "passed": c.passed,
                            "seconds": c.seconds,
                            "figures": c.figures,
                            "error": c.error,
                            "checks": [vars(x) for x in c.checks],
                        }
                        for c in cases
                    ],
                }
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = Path(args.results)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{run_id}.json"
    path.write_text(json.dumps(report, indent=1) + "\n")
    print(f"results: {path}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
