"""What runs after ``experiment.add``: packaging, batched launches, job tracking.

Floor 4: above the plugin host, below the launch API. ``packaging`` (packageables to
executables), ``launcher`` (batches, leases, submission), ``recorder`` (grouped commits of
adds), ``tracking`` (states and cancels through the backends), ``tracker_links`` (tracker
hooks asked per job), ``orphans`` (work of launchers that died), ``results`` (scalars read
from logs), ``collector`` (the garbage collector's thresholds during a sweep).
"""
