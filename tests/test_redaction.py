"""One redaction rule for every stored or printed environment; jobs still get real values."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from core_helpers import run_xcore_fake, write_fake_script
from xcore.store.redaction import REDACTED, is_secret_name, mask_url_passwords, redact_nested

SECRET_NAMES = [
    "DB_PASS", "OPENAI_KEY", "MY_SECRET_X", "GH_TOKEN_RO", "AWS_SECRET_ACCESS_KEY", "WANDB_API_KEY", "HF_TOKEN",
    "PGPASSWORD", "db-password", "GITHUB_PAT", "OAUTH_CLIENT", "AUTHORIZATION", "PRIVATE_KEY_PATH",
    "GOOGLE_APPLICATION_CREDENTIALS", "SSH_KEYS", "APIKEY", "ACCESSTOKEN", "CLIENTSECRET", "SESSION_KEY", "MYSQL_PWD",
]
PLAIN_NAMES = [
    "PATH", "PWD", "TOKENIZERS_PARALLELISM", "GIT_AUTHOR_NAME", "KEYBOARD", "PASSTHROUGH", "MONKEY_ID", "SEED",
]


@pytest.mark.parametrize("name", SECRET_NAMES)
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", PLAIN_NAMES)
def test_plain_names(name):
    assert not is_secret_name(name)


def test_url_passwords_are_masked_even_with_at_and_slash():
    assert mask_url_passwords("postgres://u:pw@h/db") == f"postgres://u:{REDACTED}@h/db"
    assert mask_url_passwords("redis://:p@s/s@host:1/0") == f"redis://:{REDACTED}@host:1/0"
    assert mask_url_passwords("http://host:8080/path") == "http://host:8080/path"


def test_nested_env_mappings_are_redacted_and_the_input_is_untouched():
    data = {"kind": "x", "env_vars": {"DB_PASS": "p1", "N": "1"}, "inner": [{"env": {"HF_TOKEN": "t"}}]}
    assert redact_nested(data) == {"kind": "x", "env_vars": {"DB_PASS": REDACTED, "N": "1"},
                                   "inner": [{"env": {"HF_TOKEN": REDACTED}}]}
    assert data["env_vars"]["DB_PASS"] == "p1"


def test_secrets_reach_the_job_but_not_the_store_or_show(tmp_path):
    """Secrets given to the executable (Packageable env_vars), the job and add(args=...) overrides."""
    out = tmp_path / "env.json"
    secrets = {
        "DB_PASS": "v-dbpass-1", "OPENAI_KEY": "v-openai-2", "MY_SECRET_X": "v-secret-3",
        "GH_TOKEN_RO": "v-token-4", "DATABASE_URL": "postgres://me:v-urlpw-5@db/x",
    }
    names = sorted([*secrets, "JOB_SECRET", "OVERRIDE_TOKEN", "PLAIN"])
    script = write_fake_script(tmp_path / "launch.py", f"""
import json, os
code = "import json, os; json.dump({{k: os.environ[k] for k in {names!r}}}, open({str(out)!r}, 'w'))"
with xm.create_experiment("secrets") as e:
    [exe] = e.package([xm.binary(fake.FakeSpec(), sys.executable, args=["-c", code], env_vars={secrets!r})])
    job = xm.Job(exe, fake.FakeExecutor(), env_vars={{"JOB_SECRET": "v-job-6", "PLAIN": "visible"}})
    e.add(job, args={{"env_vars": {{"OVERRIDE_TOKEN": "v-override-7"}}}})
""")
    assert run_xcore_fake("launch", str(script)).returncode == 0
    assert run_xcore_fake("wait", "1", "--timeout", "30").returncode == 0
    seen = json.loads(out.read_text())
    assert seen == {**secrets, "JOB_SECRET": "v-job-6", "OVERRIDE_TOKEN": "v-override-7", "PLAIN": "visible"}
    show = run_xcore_fake("show", "1", "--json")
    assert show.returncode == 0
    home = Path(os.environ["XCORE_HOME"])
    db = b"".join(p.read_bytes() for p in home.glob("xcore.db*"))
    plain = run_xcore_fake("show", "1")
    assert plain.returncode == 0
    for value in ("v-dbpass-1", "v-openai-2", "v-secret-3", "v-token-4", "v-urlpw-5", "v-job-6", "v-override-7"):
        assert value not in show.stdout, value
        assert value not in plain.stdout, value
        assert value.encode() not in db, value
    assert "visible" in show.stdout and "postgres://me:<redacted>@db/x" in show.stdout


def test_printing_and_storing_plain_text_compiles_no_pattern():
    """The redaction and terminal-escaping patterns are compiled on first need: a launch with
    empty environments and printable names compiles none of them (a few ms of start-up)."""
    import subprocess
    import sys

    code = """
import re._compiler as compiler
compiled = []
original = compiler.compile
compiler.compile = lambda p, *a, **k: (compiled.append(p), original(p, *a, **k))[1]
from xcore.cli.tables import printable
from xcore.store.redaction import redact_env, redact_nested
assert printable("experiment 1 'sweep': 20 work units") == "experiment 1 'sweep': 20 work units"
assert redact_env({}) == {} and redact_nested({"command": ["/bin/true"], "env_vars": {}}) == {
    "command": ["/bin/true"], "env_vars": {}}
assert compiled == [], compiled
assert printable("a\\x1bb\\u202e") == "a\\\\x1bb\\\\u202e"
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr


def test_printable_skips_the_pattern_only_for_text_it_would_not_change():
    import re

    from xcore.cli.tables import _UNPRINTABLE, printable

    escaped = [c for c in map(chr, range(0x3000)) if re.fullmatch(_UNPRINTABLE, c)]
    assert len(escaped) == 32 + 33 + 2 + 5 + 4
    assert not any(c.isprintable() for c in escaped)  # so printable text has none of them
    assert printable("tab\there é ✓") == "tab\\there é ✓"


def test_patterns_are_compiled_once_even_when_re_purges_its_cache(monkeypatch):
    """A launcher whose own code uses many patterns must not recompile these per job."""
    import re
    import re._compiler as compiler

    from xcore.cli.tables import printable
    from xcore.store.redaction import is_secret, mask_url_passwords

    is_secret("X", "v"), mask_url_passwords("a://u:p@h"), printable("\x1b")
    compiled = []
    original = compiler.compile
    monkeypatch.setattr(compiler, "compile", lambda p, *a, **k: (compiled.append(p), original(p, *a, **k))[1])
    re.purge()
    assert is_secret("X", "ghp_" + "a" * 20) and mask_url_passwords("a://u:p@h") == "a://u:<redacted>@h"
    assert printable("\x1b") == "\\x1b"
    assert compiled == []
