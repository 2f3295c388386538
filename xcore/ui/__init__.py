"""``xcore ui``: a local web dashboard over the metadata store.

An optional extra (``pip install 'xcore-core[ui]'``: Starlette, Uvicorn and Jinja2; the chart
library, uPlot, is vendored in ``static/`` with its MIT licence). Nothing here is imported
unless ``xcore ui`` runs. ``xcore.ui.server`` takes the store and plugin host from the
session's workspace and runs the ASGI app that ``xcore.ui.app`` builds; ``xcore.ui.data`` sorts,
filters and pages the workspace's read model (``xcore.workspace.views``) for its pages.
"""
