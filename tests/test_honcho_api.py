"""What may be read of Honcho without the HTTP stack (honcho/api.py), and the one
way a request reaches Honcho: the client (honcho/client.py), `/health` too."""

from __future__ import annotations

import subprocess
import sys

from bxmem.commands import live_checks
from bxmem.config import loader as config_module
from bxmem.honcho import client as client_module


def _loaded_after(code: str) -> set[str]:
    probe = f"import sys\n{code}\nprint(sorted({{m.split('.')[0] for m in sys.modules}}))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    return set(eval(out.stdout))


def test_sends_planning_reporting_and_the_honchos_limits_load_no_http_stack():
    loaded = _loaded_after(
        "from bxmem.honcho.api import MAX_BATCH, Unavailable, settle_wait_s\n"
        "import bxmem.commands.send.plan, bxmem.commands.send.report, bxmem.commands.send.messages\n"
        "settle_wait_s()"
    )
    assert not loaded & {"httpx", "httpcore", "ssl"}, sorted(loaded & {"httpx", "httpcore", "ssl"})


def test_the_retry_rules_read_nothing_of_honcho_or_the_stores():
    code = (
        "from bxmem.trust.send_retry import Hold, settle_at\n"
        "attempt = {'ts': '1970-01-01T00:16:40.000Z'}\n"  # 1,000 s
        "assert settle_at(attempt, 1_001.0, 95.0) == 1_095.0\n"
        "assert Hold({'x': attempt}, 1_001.0, 95.0).waits({'item': 'x', 'ws': 'w', 'session': 's', 'kind': 'turn'})\n"
        "print(sorted(m for m in sys.modules if m.startswith('bxmem.')), file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", "import sys\n" + code], capture_output=True, text=True, check=True)
    modules = eval(out.stderr)
    assert [m for m in modules if not m.startswith(("bxmem.trust", "bxmem.formats"))] == [], modules


def test_syncs_health_check_is_a_request_of_the_honcho_client(home, honcho, configure, monkeypatch):
    configure(honcho.url)
    asked: list[tuple[str, str, str]] = []
    request = client_module.WorkspaceClient.request

    def recorded(self, method, path, operation, **kwargs):
        asked.append((self.workspace, method, path))
        return request(self, method, path, operation, **kwargs)

    monkeypatch.setattr(client_module.WorkspaceClient, "request", recorded)
    result = live_checks.services(config_module.load(), None)["honcho"]
    assert result["ok"] is True and result["problem"] is None
    assert asked == [("(server)", "GET", "/health")]
