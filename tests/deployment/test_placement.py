"""Where actors run (actors/placement.py): the options each kind is created with. No Ray
instance is needed; tests/deployment/test_multinode.py runs the placement on three nodes."""
import pytest
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from actors.config import merged, parse_value
from actors.placement import actor_options, on_node
from runtime.errors import Errors, KafkaError

NODE = "ab" * 28


def test_default_placement_leaves_scheduling_to_ray():
    options = actor_options(merged({}), spread=True)
    assert options == {"num_cpus": 0, "max_concurrency": 1000}


def test_spread_scatters_only_the_kinds_asked_to_spread():
    config = merged({"actor.placement": "spread", "actor.resources": {"shoal": 1}})
    assert actor_options(config, spread=True)["scheduling_strategy"] == "SPREAD"
    assert "scheduling_strategy" not in actor_options(config)
    assert actor_options(config, spread=True)["resources"] == {"shoal": 1}


def test_an_affinity_is_soft_and_wins_over_spread():
    config = merged({"actor.placement": "spread"})
    strategy = actor_options(config, spread=True, strategy=on_node(NODE))["scheduling_strategy"]
    assert isinstance(strategy, NodeAffinitySchedulingStrategy)
    assert (strategy.node_id, strategy.soft) == (NODE, True)
    assert on_node(None) is None  # no known node: Ray's default
    # Ray ignores a soft affinity of an actor that asks for nothing: it asks for a little memory.
    assert actor_options(merged({}), strategy=on_node(NODE))["memory"] == 1 << 20
    assert "memory" not in actor_options(merged({"actor.num.cpus": 1}), strategy=on_node(NODE))


def test_client_actors_ask_for_no_deployment_resources():
    config = merged({"actor.resources": {"shoal": 1}, "actor.num.cpus": 0.5})
    options = actor_options(config, strategy=on_node(NODE), resources=False)
    assert "resources" not in options and options["num_cpus"] == 0.5 and "memory" not in options


def test_an_unknown_placement_is_refused():
    with pytest.raises(KafkaError) as e:
        actor_options(merged({"actor.placement": "everywhere"}))
    assert e.value.error is Errors.INVALID_CONFIG


def test_resources_from_the_command_line():
    assert parse_value('{"shoal": 1}') == {"shoal": 1}
    assert parse_value("spread") == "spread"
