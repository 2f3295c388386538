"""``xcore ui``: a local web dashboard over the metadata store.

An optional extra (``pip install 'xcore-core[ui]'``: Starlette, Uvicorn, Jinja2 and Plotly,
whose wheel ships the chart library served from this machine). Nothing here is imported
unless ``xcore ui`` runs. ``xcore.ui.app`` builds the ASGI app, ``xcore.ui.data`` turns the
store's records into the pages' rows, ``xcore.ui.server`` runs it.
"""
