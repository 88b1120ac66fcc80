"""The validated configuration's cache (memory/bxmem/config.marshal) across an
upgrade: a cache another version wrote, or one of a configuration that has
changed since, is a miss that nothing reports, whatever it holds; the TOML is
validated again and the cache written anew. A cache of this version and this
configuration that is of another shape is said once (tests/test_state_shapes.py).
"""

from __future__ import annotations

import logging
import marshal

from bxmem.config import loader as config_module
from bxmem.start.marshal_seal import seal, unseal

READ = '\n[[honcho.read]]\nagent = "boxmaker1"\nworkspace = "bm1-trusted"\nclass = "public"\n'


def _cache(home):
    return home / "memory" / "bxmem" / config_module.CACHE_FILE


def _warm(home, configure):
    configure("http://127.0.0.1:9", extra=READ)
    (home / "memory" / "bxmem").mkdir(parents=True)
    config_module.load()  # validates and writes the cache
    return marshal.loads(unseal(_cache(home).read_bytes()))


def test_a_cache_of_another_version_is_a_quiet_miss_whatever_it_holds(home, configure, caplog):
    cached = _warm(home, configure)
    older = [cached["key"][0] - 1, *cached["key"][1:]]
    # As an older bxmem wrote it: its read sources' fields under another name.
    read = [{"agent": "boxmaker1", "workspace": "bm1-trusted", "trust": "untrusted", "class_": "public"}]
    data = {**cached["data"], "honcho": {**cached["data"]["honcho"], "read": read}}
    _cache(home).write_bytes(seal(marshal.dumps({"key": older, "data": data})))
    with caplog.at_level(logging.INFO, logger="bxmem"):
        config = config_module.load()
    assert config.honcho is not None
    assert [(s.agent, s.trust_class) for s in config.honcho.read] == [("boxmaker1", "public")]
    assert caplog.messages == []
    assert marshal.loads(unseal(_cache(home).read_bytes()))["key"] == cached["key"]  # cached anew


def test_a_cache_of_this_version_of_another_shape_is_said(home, configure, caplog):
    cached = _warm(home, configure)
    cached["data"]["honcho"]["read"][0]["class_"] = cached["data"]["honcho"]["read"][0].pop("trust_class")
    _cache(home).write_bytes(seal(marshal.dumps(cached)))
    with caplog.at_level(logging.INFO, logger="bxmem"):
        config = config_module.load()
    assert config.honcho is not None
    assert [s.trust_class for s in config.honcho.read] == ["public"]
    assert len(caplog.messages) == 1 and "validated again and cached again" in caplog.messages[0]
