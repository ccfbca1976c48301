"""Dependency audit with pip-audit against the installed environment.

The offline part always runs: pip-audit reads the environment and lists
what it would audit. The audit itself asks the vulnerability service (PyPI's
JSON API) once per installed package, so it runs only when
``AUDIO_REWARD_TEST_PIP_AUDIT=1`` is set; where the service cannot be reached the
test is skipped with that reason, never failed for it.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

PIP_AUDIT = [sys.executable, "-m", "pip_audit", "--skip-editable", "--progress-spinner", "off"]
_UNREACHABLE = re.compile(r"ConnectionError|NameResolutionError|Max retries exceeded|Temporary failure in name "
                          r"resolution|Network is unreachable|timed out|ProxyError|SSLError", re.I)


def test_pip_audit_reads_the_installed_environment() -> None:
    proc = subprocess.run([*PIP_AUDIT, "--dry-run"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = re.search(r"would have audited (\d+) packages", proc.stderr + proc.stdout)
    assert found and int(found.group(1)) > 20, proc.stderr[-2000:]


@pytest.mark.skipif(os.environ.get("AUDIO_REWARD_TEST_PIP_AUDIT") != "1",
                    reason="the audit queries the vulnerability service per package; set AUDIO_REWARD_TEST_PIP_AUDIT=1")
def test_no_known_vulnerabilities_in_the_installed_environment() -> None:
    proc = subprocess.run([*PIP_AUDIT, "--format", "json"], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 and _UNREACHABLE.search(proc.stderr):
        pytest.skip("pip-audit could not reach the vulnerability service (PyPI JSON API): "
                    + proc.stderr.strip().splitlines()[-1][:300])
    report = json.loads(proc.stdout or "{}")
    vulnerable = [f"{d['name']} {d['version']}: {', '.join(v['id'] for v in d['vulns'])}"
                  for d in report.get("dependencies", []) if d.get("vulns")]
    assert not vulnerable, "known vulnerabilities:\n" + "\n".join(vulnerable)
    assert proc.returncode == 0, proc.stderr[-2000:]
