"""Where the deployment's actors run, and the options they are created with.

Every actor asks Ray for `actor.num.cpus` CPUs and `actor.resources`; where it then lands is
Ray's scheduling strategy, chosen by `actor.placement`:

- "default": Ray's default scheduler (it packs actors onto few nodes).
- "spread": coordinators (group, share-state, transaction) and the controller use Ray's
  SPREAD strategy, so a node failure takes a share of each kind, not all.

In both, partition host i asks for node i modulo the nodes there were at deployment
(actors/server/deployment.py), a SharePartition runs on its partition host's node when it
can (they talk most: every fetch reads from the leader), and a client actor on the node of
the process that made it (it is that process's network thread; it asks for
`actor.num.cpus` but not for `actor.resources`). These affinities are soft: if the node is
gone or full, Ray puts the actor elsewhere, and a restarted actor moves freely.
"""
from __future__ import annotations

import warnings

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from runtime.errors import Errors, KafkaError

__all__ = ["PLACEMENTS", "remote", "actor_options", "on_node", "current_node", "restarted_actor"]

PLACEMENTS = ("default", "spread")
AFFINITY_MEMORY = 1 << 20  # bytes of Ray's logical memory resource; see actor_options
SPREAD = "spread"


def current_node() -> str:
    """The Ray node id of the calling process."""
    return ray.get_runtime_context().get_node_id()


def restarted_actor() -> bool:
    """Whether the calling process is an actor that Ray restarted; False outside an actor
    (an actor class driven by a test without Ray, where asking Ray would start it)."""
    if not ray.is_initialized():
        return False
    context = ray.get_runtime_context()
    if context.get_actor_id() is None:
        return False
    with warnings.catch_warnings():  # Ray's own property reads its deprecated actor_id
        warnings.simplefilter("ignore", DeprecationWarning)
        return bool(context.was_current_actor_reconstructed)


def on_node(node_id: str | None):
    """A soft affinity to `node_id` (None: Ray's default)."""
    return NodeAffinitySchedulingStrategy(node_id=node_id, soft=True) if node_id else None


def actor_options(config: dict, *, spread: bool = False, strategy=None, resources: bool = True) -> dict:
    """Resources and scheduling for one actor: `spread` for the kinds that `actor.placement`
    = "spread" scatters; `strategy` is an explicit one (an affinity) that wins over both;
    `resources=False` leaves out `actor.resources` (client actors: they run beside their
    user, whose node need not have the resources the deployment's actors ask for)."""
    placement = config.get("actor.placement", "default")
    if placement not in PLACEMENTS:
        raise KafkaError(Errors.INVALID_CONFIG, f"actor.placement must be one of {PLACEMENTS}, not {placement!r}")
    options = dict(num_cpus=config.get("actor.num.cpus", 0), max_concurrency=1000)
    if resources and config.get("actor.resources"):
        options["resources"] = dict(config["actor.resources"])
    if strategy is not None:
        options["scheduling_strategy"] = strategy
        if not options["num_cpus"] and not options.get("resources"):
            # Ray places an actor that asks for no resource on any node, whatever its soft
            # affinity says (ray-project/ray#25360 fixed only the hard one); a token amount
            # of Ray's logical memory makes the request non-empty, so the affinity holds.
            options["memory"] = AFFINITY_MEMORY
    elif spread and placement == SPREAD:
        options["scheduling_strategy"] = "SPREAD"
    return options


def remote(cls, name: str, namespace: str, detached: bool, config: dict, restartable: bool = True, *,
           spread: bool = False, strategy=None, resources: bool = True):
    """`cls` as a named actor of the deployment (the one already running under the name, if any)."""
    options = dict(name=name, namespace=namespace, get_if_exists=True,
                   **actor_options(config, spread=spread, strategy=strategy, resources=resources))
    if restartable:
        options["max_restarts"] = -1
    if detached:
        options["lifetime"] = "detached"
    return ray.remote(cls).options(**options)
