"""The ACL APIs (DescribeAcls, CreateAcls, DeleteAcls), answered as a Kafka broker with no
authorizer answers them: SECURITY_DISABLED on the request, each creation and each filter.
shoal authenticates (SASL) but does not authorize, so there are no ACLs to keep; a client
learns that rather than an unsupported-version error, as from a default Kafka broker."""
from __future__ import annotations

from runtime.errors import Errors
from runtime.wire.entities import plain

NO_AUTHORIZER = {"error_code": Errors.SECURITY_DISABLED.code, "error_message": "No Authorizer is configured."}


async def describe_acls(gw, event) -> dict:
    return {"throttle_time": 0, **NO_AUTHORIZER, "resources": []}


async def create_acls(gw, event) -> dict:
    return {"throttle_time": 0, "results": [dict(NO_AUTHORIZER) for _ in plain(event.request)["creations"]]}


async def delete_acls(gw, event) -> dict:
    return {"throttle_time": 0, "filter_results": [{**NO_AUTHORIZER, "matching_acls": []}
                                                   for _ in plain(event.request)["filters"]]}


HANDLERS = {
    29: (1, 3, describe_acls),
    30: (1, 3, create_acls),
    31: (1, 3, delete_acls),
}
