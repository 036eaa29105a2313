"""`make ui`'s greeting: the login a newcomer needs, and a jobs hint that works in a fresh shell."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from scripts.ui import USER, greeting, login


def test_greeting_names_url_user_and_password(tmp_path: Path) -> None:
    passwords = tmp_path / "simple_auth_manager_passwords.json.generated"
    passwords.write_text(json.dumps({USER: "s3cret-pw"}))
    text = greeting(passwords, "http://127.0.0.1:9/")
    assert text.startswith("\n" + login(passwords))
    assert "user:        admin\n" in text
    assert "password:    s3cret-pw\n" in text
    assert "Trigger" in text
    assert "w/ config" not in text


def test_the_jobs_hint_runs_in_a_fresh_shell(tmp_path: Path) -> None:
    """No .venv/bin on PATH, another directory: the printed command still finds aip-local."""
    passwords = tmp_path / "pw.json"
    passwords.write_text("{}")
    hint = next(
        line for line in greeting(passwords, "http://127.0.0.1:9/").splitlines() if "jobs list" in line
    )
    command = hint.strip().rstrip(")")
    program = Path(command.split()[1])
    assert program.is_absolute()
    result = subprocess.run(
        ["/bin/sh", "-c", command.replace("jobs list", "--help")],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/")},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "aip-local" in result.stdout
