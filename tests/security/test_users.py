"""Users' SCRAM credentials in the controller's shard, pure: alter, describe, and the log's
records rebuilding them."""
from runtime.codec import decode_records, encode_records
from runtime.errors import Errors
from runtime.security import users
from runtime.security.scram import credential, password_matches, salted_password

SALT = b"0123456789abcdef"


def upsert(name, password="pw", mechanism=1, iterations=4096):
    m = {1: "SCRAM-SHA-256", 2: "SCRAM-SHA-512"}.get(mechanism, "SCRAM-SHA-256")
    return {"name": name, "mechanism": mechanism, "iterations": iterations, "salt": SALT,
            "salted_password": salted_password(m, password, SALT, max(iterations, 1))}


def apply(creds, deletions=(), upsertions=()):
    records, results = users.alter(creds, list(deletions), list(upsertions))
    for r in records:
        users.replay(creds, r)
    return {r["user"]: Errors.for_code(r["error_code"]) for r in results}


def test_upsert_stores_keys_not_the_password():
    creds = {}
    assert apply(creds, upsertions=[upsert("alice", "s3cret"), upsert("bob", mechanism=2)]) == {
        "alice": Errors.NONE, "bob": Errors.NONE}
    stored = creds["alice"]["SCRAM-SHA-256"]
    assert stored == credential("SCRAM-SHA-256", "s3cret", SALT, 4096)
    assert password_matches("SCRAM-SHA-256", stored, "s3cret")
    assert b"s3cret" not in repr(stored).encode()
    assert users.describe(creds, None)["results"] == [
        {"user": "alice", "error_code": 0, "error_message": None, "credential_infos": [{"mechanism": 1, "iterations": 4096}]},
        {"user": "bob", "error_code": 0, "error_message": None, "credential_infos": [{"mechanism": 2, "iterations": 4096}]}]


def test_bad_alterations_change_nothing():
    creds = {}
    apply(creds, upsertions=[upsert("alice")])
    before = {u: dict(m) for u, m in creds.items()}
    assert apply(creds, deletions=[{"name": "alice", "mechanism": 2}, {"name": "nobody", "mechanism": 1}],
                 upsertions=[upsert("carol", iterations=1000), upsert("dave", mechanism=7), upsert(""),
                             upsert("erin"), upsert("erin", mechanism=2)]) == {
        "alice": Errors.RESOURCE_NOT_FOUND, "nobody": Errors.RESOURCE_NOT_FOUND,
        "carol": Errors.UNACCEPTABLE_CREDENTIAL, "dave": Errors.UNSUPPORTED_SASL_MECHANISM,
        "": Errors.UNACCEPTABLE_CREDENTIAL, "erin": Errors.DUPLICATE_RESOURCE}
    assert creds == before


def test_delete_and_describe_errors():
    creds = {}
    apply(creds, upsertions=[upsert("alice")])
    assert apply(creds, deletions=[{"name": "alice", "mechanism": 1}]) == {"alice": Errors.NONE}
    assert creds == {}
    answer = users.describe(creds, [{"name": "alice"}, {"name": "x"}, {"name": "x"}])
    assert [(r["user"], Errors.for_code(r["error_code"])) for r in answer["results"]] == [
        ("alice", Errors.RESOURCE_NOT_FOUND), ("x", Errors.DUPLICATE_RESOURCE)]


def test_records_survive_the_codec():
    creds, rebuilt = {}, {}
    records, _ = users.alter(creds, [], [upsert("alice"), upsert("bob", mechanism=2)])
    records += users.alter({"alice": {"SCRAM-SHA-256": None}}, [{"name": "alice", "mechanism": 1}], [])[0]
    for r in decode_records(encode_records(records), 0):
        users.replay(rebuilt, r)
    assert rebuilt == {"bob": {"SCRAM-SHA-512": credential("SCRAM-SHA-512", "pw", SALT, 4096)}}
