"""The chaos soak's short variant, in the normal suite (tests/soak/soak.py runs it longer on
demand): half a minute of every protocol at once (some 20 faults) while actors of every kind are killed,
the controller among them, and the process of the share group's Kafka member (confluent-kafka's
ShareConsumer through the gateway)."""
import json

import pytest

from tests.soak.soak import run

pytestmark = pytest.mark.ray


def test_half_a_minute_of_chaos_breaks_no_invariant(ray_session, tmp_path):
    summary = run(minutes=0.5, seed=20, data_dir=str(tmp_path / "soak"))
    assert summary["faults_total"] >= 10, summary
    assert summary["checked"]["produced_records"] > 0 and summary["checked"]["offset_commits"] > 0, summary
    assert summary["checked"]["share_deliveries_kafka"] > 0, summary  # the Kafka member took part
    # In full: pytest shortens a long assertion message, and the histories are what a
    # reader needs to find the cause.
    assert not summary["violations"], json.dumps(
        {k: summary[k] for k in ("seed", "violations", "violation_histories", "faults")}, indent=1, default=str)
