"""Executors: where ingest's prepare stage (read, chunk, embed) runs, each behind its own extra.

* :mod:`agentrag.executors.ray`: ``RayExecutor``, on Ray workers (``pip install 'agentrag[ray]'``).

The default, :class:`agentrag.LocalExecutor`, runs in the calling process. Writing always
happens in the calling process (each document all or nothing), whatever the executor.
"""
