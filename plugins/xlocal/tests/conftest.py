# Fixtures of the end-to-end tests moved here from the core's tests; used by name
# (``pytestmark = pytest.mark.usefixtures("xcore_home")``), never automatically.
from xlocal_helpers import pg_url, xcore_home  # noqa: F401  (fixtures)
