"""Prints the flags and the TASK variable a task received."""

import os
import sys

print(sys.argv[1:], os.environ.get("TASK"))
