"""Helpers built on the launch API, as XManager's ``xmanager.contrib`` (``xcore port`` maps
``xmanager.contrib.tensorboard`` here; docs/porting.md says why the other modules are absent).
Nothing here is imported by ``import xcore``."""
