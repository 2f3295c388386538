"""Backend plumbing every executor needs, written once in the core (floor 2, on the model).

Plugins use it through ``xcore.plugin`` (which re-exports every public name here):

- ``logs``: follow a growing log file as text, decoded incrementally (UTF-8, never splitting
  a character), with a defined end of stream.
- ``files``: atomic, private file writes (0600) and private directories (0700).
- ``cancel``: cancel markers, so a stopped job reads as CANCELLED from any process.
- ``exits``: one exit-code convention and wording for exits and signals.
- ``ignore``: the one list of files never shipped with a project.
- ``digests``: a persistent cache of file digests keyed by (size, mtime, ctime, inode).
"""
