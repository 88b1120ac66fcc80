"""neutralise and the known-prefix secret rules: each rule has a positive case."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bxmem.sanitize import chunks, find_secret, neutralise, secret_rules

# Fake secrets of each well-known shape, assembled so this file holds none whole.
EXAMPLES = {
    "aws-access-key-id": "AKIA" + "Z7QK2M4N6P8R0T2V",
    "aws-secret-access-key": 'aws_secret_access_key = "' + "wJalrXUtnFEMI/K7MDENG/bPxRfiCY" + "EXAMPLEKEY" + '"',
    "github-token": "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8",
    "github-fine-grained-pat": "github_pat_" + "11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz",
    "gitlab-token": "glpat-" + "xxxxxxxxxxxxxxxxxxxx",
    "anthropic-api-key": "sk-ant-" + "api03-abcdefghijklmnopqrstuvwxyz012345",
    "openai-api-key": "sk-" + "proj-abcdefghijklmnopqrstuvwxyz0123456789",
    "slack-token": "xoxb-" + "123456789012-1234567890123-abcdefghij",
    "slack-webhook": "https://hooks.slack.com/services/" + "T00000000/B00000000/XXXXXXXXXXXXXXXXXXXXXXXX",
    "stripe-key": "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc",
    "google-api-key": "AIza" + "SyA-abcdefghijklmnopqrstuvwxyz01234",
    "google-oauth-secret": "GOCSPX-" + "abcdefghijklmnopqrstuvwx",
    "pem-private-key": "-----BEGIN " + "RSA PRIVATE KEY-----\nMIIEow...",
    "jwt": "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxMjM0NTY3ODkwIn0" + ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "npm-token": "npm_" + "abcdefghijklmnopqrstuvwxyz0123456789",
    "pypi-token": "pypi-AgE" + "IcHlwaS5vcmcCJGE0ZjQ2YjU1LWNmNzAtNDg1Yi1hYjkxLTJiNmE2",
    "huggingface-token": "hf_" + "abcdefghijklmnopqrstuvwxyzABCDEFGH",
    "sendgrid-key": "SG." + "abcdefghijklmnopqrstuv" + "." + "abcdefghijklmnopqrstuvwxyz0123456789ABCDEFG",
    "twilio-key": "SK" + "0123456789abcdef0123456789abcdef",
    "digitalocean-token": "dop_v1_" + "a" * 64,
    "shopify-token": "shpat_" + "0123456789abcdef0123456789abcdef",
    "telegram-bot-token": "123456789:AA" + "Hdqwertyuiopasdfghjklzxcvbnm12345",
    "age-secret-key": "AGE-SECRET-KEY-1" + "Q" * 58,
    "url-with-password": "postgres://app:" + "hunter2pw@db.internal:5432/app",
}


def test_every_rule_has_an_example():
    assert set(EXAMPLES) == {name for name, _ in secret_rules()}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_rule_matches_its_shape_in_a_sentence(name):
    assert find_secret(f"here you go: {EXAMPLES[name]} thanks") is not None


@pytest.mark.parametrize(
    "text",
    [
        "we decided nightly restic snapshots",
        "the NAS is at 10.0.0.5",
        "ask-ant-farm about it",
        "AKIA is a prefix",
        "https://example.org/path?x=1",
        "see skeleton-key-for-the-door",
    ],
)
def test_ordinary_text_is_not_a_secret(text):
    assert find_secret(text) is None


def test_zero_width_character_does_not_hide_a_key():
    key = EXAMPLES["github-token"]
    assert find_secret(key[:10] + "\u200b" + key[10:]) == "github-token"


def test_neutralise_strips_controls_bidi_and_zero_width_and_normalises():
    assert neutralise("a\u202eb\u200bc\u2066d\ufeff") == "abcd"
    assert neutralise("x\x00y\x1bz\x7f") == "xyz"
    assert neutralise("line1\r\nline2\rline3\tend") == "line1\nline2\nline3\tend"
    assert neutralise("e\u0301") == "\u00e9"  # NFC
    assert neutralise("lone \ud800 surrogate") == "lone \ufffd surrogate"


@given(st.text())
def test_neutralise_is_idempotent_and_encodable(text):
    once = neutralise(text)
    assert neutralise(once) == once
    once.encode("utf-8")


def test_chunks():
    assert chunks("", 5) == [""]
    assert chunks("abcdefghij", 5) == ["abcde", "fghij"]
    assert chunks("abcdefghijk", 5) == ["abcde", "fghij", "k"]
    assert "".join(chunks("x" * 25_001, 25_000)) == "x" * 25_001
