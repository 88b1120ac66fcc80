"""The owner's name (issue 28, item 5): an owner no speaker can ever be is refused at
load, saying what to write; turns decided nowhere because their speaker reads as the
owner or the agent are an attention line in sync."""

from __future__ import annotations

import json
import os
import time

import pytest
from helpers import bxmem_main, write_log

from bxmem.demo.sample import turn_lines


def honcho_section(owner: str, agent: str = "boxmaker0") -> str:
    return (
        f'[honcho]\nurl = "http://127.0.0.1:9"\nagent = "{agent}"\nowner = "{owner}"\n'
        'trusted = "bm0-trusted"\nuntrusted = "bm0-untrusted"\nfleet = "fleet"\n'
    )


@pytest.mark.parametrize(
    ("owner", "agent", "said"),
    [
        (
            "Kyle",
            "boxmaker0",
            "no speaker's peer is ever 'Kyle' (speakers' names are folded to lower case): write 'kyle'",
        ),
        (
            "kyle.r",
            "boxmaker0",
            "no speaker's peer is ever 'kyle.r' (a `.` is written `_Dot_` in a peer id): write 'kyle_Dot_r'",
        ),
        ("KYLE_Dot_R", "boxmaker0", "write 'kyle_Dot_r'"),
        ("boxmaker_Dot_0", "boxmaker_0", "reads as the agent 'boxmaker_0'"),
        ("BoxMaker0", "boxmaker0", "write 'boxmaker0'"),
    ],
)
def test_an_owner_no_speaker_can_be_is_refused_naming_the_field_and_what_to_write(config_file, owner, agent, said):
    config_file.write_text(honcho_section(owner, agent))
    result = bxmem_main("config", "check")
    assert result.returncode == 78
    [line] = result.stderr.splitlines()
    assert ("honcho.owner: " in line or "honcho: owner: " in line) and said in line, line


@pytest.mark.parametrize("owner", ["kyle", "kyle_Dot_r", "kyle_r", "ana-lima", "k"])
def test_an_owner_a_speaker_can_be_is_accepted(config_file, owner):
    config_file.write_text(honcho_section(owner))
    assert bxmem_main("config", "check").returncode == 0


def test_owner_turns_decided_nowhere_are_an_attention_line(home, brokerd, config_file):
    config_file.write_text(honcho_section("kyle_r"))
    os.utime(config_file, (time.time() - 60, time.time() - 60))
    write_log(home, "s", turn_lines(1, "hello", "hi", speaker="kyle.r"))  # the owner, as loopd logs them
    assert bxmem_main("decide").returncode == 0
    result = bxmem_main("sync", "--json")
    assert result.returncode == 4
    status = json.loads(result.stdout)
    assert status["decided_nowhere"] == {"speaker-named-like-the-owner": 1}
    [line] = [a for a in status["attention"] if "speaker-named-like-the-owner" in a]
    assert "runbook owner-name" in line and "_Dot_" in line
    config_file.write_text(honcho_section("kyle_Dot_r"))  # fixed: the line goes, new turns are the owner's
    assert not [a for a in json.loads(bxmem_main("sync", "--json").stdout)["attention"] if "owner-name" in a]
