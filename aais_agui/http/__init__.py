"""The transports: the AG-UI endpoint, the AAIS HTTP/SSE and WebSocket profiles, the inbox.

One module a concept: ``app`` (``create_app``) assembles the routers (``agui``,
``approvals``, ``websocket``, ``inbox``, ``standing``), which share ``security``
(authentication, CSRF, origins), ``hosts``, ``limits`` and ``decisions`` (the
rules every presenter binding shares); ``sse`` is the wire encoder. The routers are
handed the one :class:`~aais_agui.service.ApprovalService`, whose driver every resume
goes through.
Everything here needs the ``server`` extra.
"""
