"""AlterUserScramCredentials and DescribeUserScramCredentials on the controller, which keeps
the users' SCRAM credentials (runtime.security.users)."""
from __future__ import annotations

from runtime.wire.entities import plain

from ... import naming


async def alter_user_scram_credentials(gw, event) -> dict:
    r = plain(event.request)
    results = await gw.call(naming.CONTROLLER, "alter_user_scram_credentials", r["deletions"], r["upsertions"])
    return {"throttle_time": 0, "results": results}


async def describe_user_scram_credentials(gw, event) -> dict:
    answer = await gw.call(naming.CONTROLLER, "describe_user_scram_credentials", plain(event.request)["users"])
    return {"throttle_time": 0, **answer}


HANDLERS = {
    50: (0, 0, describe_user_scram_credentials),
    51: (0, 0, alter_user_scram_credentials),
}
