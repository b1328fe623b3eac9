"""Users' SCRAM credentials as the controller keeps them: AlterUserScramCredentials and
DescribeUserScramCredentials on a map user -> mechanism -> ScramCredential, which its log's
records rebuild. Requests and answers are plain dicts with Kafka's field names.

AlterUserScramCredentials carries the salted password (the client salts and hashes the
password), so the password never reaches the server; the stored and server keys are derived
here and only they are kept.
"""
from __future__ import annotations

from collections import Counter
from typing import NamedTuple

from ..codec import Record, register
from ..errors import Errors, KafkaError
from . import scram


class ScramCredentialKey(NamedTuple):
    user: str
    mechanism: str


class ScramCredentialValue(NamedTuple):
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


register(41, ScramCredentialKey, ScramCredentialValue)

Credentials = dict[str, dict[str, scram.ScramCredential]]


def replay(credentials: Credentials, record: Record) -> None:
    key = record.key
    if record.value is None:
        mechanisms = credentials.get(key.user, {})
        mechanisms.pop(key.mechanism, None)
        if not mechanisms:
            credentials.pop(key.user, None)
    else:
        credentials.setdefault(key.user, {})[key.mechanism] = scram.ScramCredential(*record.value)


def _mechanism(code: int) -> str:
    try:
        return scram.MECHANISM_TYPES[code]
    except KeyError:
        raise KafkaError(Errors.UNSUPPORTED_SASL_MECHANISM, f"unknown SCRAM mechanism type {code}") from None


def _result(user: str, error: KafkaError | None = None) -> dict:
    return {"user": user, "error_code": error.code if error else 0, "error_message": error.message if error else None}


def alter(credentials: Credentials, deletions: list[dict], upsertions: list[dict]) -> tuple[list[Record], list[dict]]:
    """(records, results): one result per user named, in the order first named; a user
    named twice in one request fails as a whole (DUPLICATE_RESOURCE) and changes nothing."""
    counts = Counter(d["name"] for d in (*deletions, *upsertions))
    records, results = [], {}
    for op, change in [("delete", d) for d in deletions] + [("upsert", u) for u in upsertions]:
        user = change["name"]
        try:
            if counts[user] > 1:
                raise KafkaError(Errors.DUPLICATE_RESOURCE, "a user credential cannot be altered twice in one request")
            if not user:
                raise KafkaError(Errors.UNACCEPTABLE_CREDENTIAL, "the user name must not be empty")
            mechanism = _mechanism(change["mechanism"])
            if op == "delete":
                if mechanism not in credentials.get(user, {}):
                    raise KafkaError(Errors.RESOURCE_NOT_FOUND,
                                     f"no {mechanism} credential of user {user!r} to delete")
                records.append(Record(ScramCredentialKey(user, mechanism)))
            else:
                scram.check_iterations(change["iterations"])
                if not change["salt"] or not change["salted_password"]:
                    raise KafkaError(Errors.UNACCEPTABLE_CREDENTIAL, "the salt and salted password must not be empty")
                c = scram.credential_from_salted(mechanism, bytes(change["salted_password"]), bytes(change["salt"]),
                                                 change["iterations"])
                records.append(Record(ScramCredentialKey(user, mechanism), ScramCredentialValue(c.salt, c.stored_key, c.server_key, c.iterations)))
            results.setdefault(user, _result(user))
        except KafkaError as e:
            results.setdefault(user, _result(user, e))
    return records, list(results.values())


def describe(credentials: Credentials, users: list[dict] | None) -> dict:
    """The DescribeUserScramCredentials answer: every user when `users` is null or empty."""
    names = sorted(credentials) if not users else [u["name"] for u in users]
    counts = Counter(names)
    results = []
    for user in dict.fromkeys(names):
        if counts[user] > 1:
            error = KafkaError(Errors.DUPLICATE_RESOURCE, f"user {user!r} named twice")
        elif user not in credentials:
            error = KafkaError(Errors.RESOURCE_NOT_FOUND, f"user {user!r} has no SCRAM credential")
        else:
            infos = [{"mechanism": scram.MECHANISMS[m][1], "iterations": c.iterations}
                     for m, c in sorted(credentials[user].items())]
            results.append({**_result(user), "credential_infos": infos})
            continue
        results.append({**_result(user, error), "credential_infos": []})
    return {"error_code": 0, "error_message": None, "results": results}
