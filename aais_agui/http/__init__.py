"""The transports: the AG-UI endpoint, the AAIS HTTP/SSE and WebSocket profiles, the inbox.

One module a concept: ``app`` (``create_app``) assembles the routers (``agui``,
``approvals``, ``websocket``, ``inbox``, ``standing``), which share ``security``
(authentication, CSRF, origins), ``hosts``, ``limits`` and ``decisions`` (the
rules every presenter binding shares); ``sse`` is the wire encoder, ``background``
resumes what an endpoint recorded, ``watcher`` resumes what other processes did.
Everything here needs the ``server`` extra.
"""
