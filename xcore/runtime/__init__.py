"""What runs after ``experiment.add``: packaging, batched launches, job tracking.

``packaging`` (packageables to executables), ``launcher`` (batches, leases, submission),
``tracking`` (states and cancels through the backends), ``orphans`` (work of launchers that
died), ``results`` (scalars read from logs), ``progress`` (the live line on a terminal).
"""
