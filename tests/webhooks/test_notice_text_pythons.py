"""Sanitized request text adds no mail header on any Python at hand, patch level included.

Some patch levels of the Pythons ``requires-python`` admits decode an RFC 2047 encoded
word while folding a header, and write the decoded line break as it is. The sanitizer
(:mod:`aais_langgraph.webhooks.plain_text`, standard library only) is loaded by path in
each interpreter found (this one, ``python3.10`` to ``python3.14`` on ``PATH``, and the
``AAIS_OTHER_PYTHONS`` paths, separated by ``os.pathsep``), and a message is built,
written as SMTP sends it and parsed back there, for every line separator and encoded
word: the raw text may inject or be refused, the sanitized text never injects.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # an interpreter process each

ROOT = Path(__file__).resolve().parents[2]
PLAIN_TEXT = ROOT / "aais_langgraph" / "webhooks" / "plain_text.py"
CHECK = r"""
import email, email.policy, importlib.util, json, sys
from email.message import EmailMessage

spec = importlib.util.spec_from_file_location("plain_text", sys.argv[1])
plain_text = importlib.util.module_from_spec(spec)
spec.loader.exec_module(plain_text)
breaks = ["\r", "\n", "\r\n", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
words = [
    "=?utf-8?q?x=0D=0ABcc:_evil@example.com?=",
    "=?utf-8?q?x=0D=0AX-Injected:_1=0D=0A=0D=0APlease_approve_at_http://evil.example/?=",
    "=?utf-8?b?eA0KQmNjOiBldmlsQGV4YW1wbGUuY29t?=",
]
written = ["Subject", "From", "To", "Content-Type", "Content-Transfer-Encoding", "MIME-Version"]

def read_back(subject):
    message = EmailMessage()
    message["Subject"], message["From"], message["To"] = subject, "a@example.com", "b@example.com"
    message.set_content("body")
    return email.message_from_bytes(message.as_bytes(policy=email.policy.SMTP))

tried = injected = 0
for hostile in breaks + words + [word + " " + "y" * 90 for word in words]:
    subject = "Approval requested (high risk): Pay " + hostile + " now " + "z" * 40
    tried += 1
    injected += sorted(read_back(plain_text.header_text(subject)).keys()) != sorted(written)
print(json.dumps({"python": sys.version.split()[0], "tried": tried, "injected": injected}))
"""


def interpreters() -> list[str]:
    """Every usable interpreter, once per version."""
    found = [sys.executable]
    found += [shutil.which(f"python3.{minor}") or "" for minor in range(10, 15)]
    found += os.environ.get("AAIS_OTHER_PYTHONS", "").split(os.pathsep)
    versions: dict[str, str] = {}
    for path in filter(None, found):
        try:
            asked = subprocess.run(
                [path, "-c", "import sys; print(sys.version.split()[0])"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except OSError:
            continue
        if asked.returncode == 0 and asked.stdout.strip() >= "3.10":
            versions.setdefault(asked.stdout.strip(), path)
    return sorted(versions.values())


@pytest.mark.parametrize("python", interpreters())
def test_sanitized_text_adds_no_header_on_this_python(python: str) -> None:
    ran = subprocess.run(
        [python, "-c", CHECK, str(PLAIN_TEXT)], capture_output=True, text=True, timeout=60
    )
    assert ran.returncode == 0, ran.stderr
    said = json.loads(ran.stdout)
    assert said["tried"] == 17 and said["injected"] == 0, said
