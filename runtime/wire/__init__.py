"""Kafka's wire protocol, sans-I/O in the style of h11: bytes in, events out.

`frames` cuts the byte stream into size-prefixed frames, `entities` turns plain values into
kio's generated message classes and back, `versions` is the version negotiation (ApiVersions),
`connection` is one server-side connection's state machine, `error_responses` is the answer
to a request that failed as a whole and `records` is Kafka's record batch v2. The gateway actor (actors/server/gateway.py) owns the sockets.
"""
