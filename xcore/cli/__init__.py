"""The command line: ``main`` parses (cheaply, so ``xcore --help`` is fast), ``commands`` runs
the core commands, ``store_commands`` the store ones, ``tables`` prints, ``port`` rewrites
XManager scripts, ``plugin_template`` generates a plugin."""
