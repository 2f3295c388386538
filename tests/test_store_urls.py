"""Store URLs are shown without their passwords."""

from __future__ import annotations

import pytest

from xcore.errors import PluginLoadError
from xcore.hooks.host import PluginHost
from xcore.store.redaction import redact_url


@pytest.mark.parametrize(("url", "shown"), [
    ("postgresql://ann:s3cret@db:5432/x", "postgresql://ann:<redacted>@db:5432/x"),
    ("postgresql://:s3cret@db/x", "postgresql://:<redacted>@db/x"),
    ("postgres://ann@db/x?sslmode=require&password=s3cret", "postgres://ann@db/x?sslmode=require&password=<redacted>"),
    ("postgresql://db/x?sslpassword=s3cret&sslmode=verify-full",
     "postgresql://db/x?sslpassword=<redacted>&sslmode=verify-full"),
    ("host=db password=s3cret user=ann", "host=db password=<redacted> user=ann"),
    ("postgresql://ann@db/x", "postgresql://ann@db/x"),
    ("sqlite:////home/ann/xcore.db", "sqlite:////home/ann/xcore.db"),
])
def test_redact_url(url, shown):
    assert redact_url(url) == shown


def test_unknown_store_url_error_hides_the_password():
    with pytest.raises(PluginLoadError) as caught:
        PluginHost(load_entry_points=False).open_store("mysql://ann:s3cret@db/x")
    assert "s3cret" not in str(caught.value) and "<redacted>" in str(caught.value)
