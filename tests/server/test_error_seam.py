"""Every request a coordinator actor serves has its one error response in runtime.messages,
which ShardHost._answer gives when the operation fails (no Ray is started)."""
import inspect

import actors.server.controller
import actors.server.group_coordinator
import actors.server.share_coordinator
import actors.server.transaction_coordinator
from runtime.messages.errors import _BUILDERS

# Methods that answer per partition of their own (markers), or whose errors reach the
# caller as Kafka's Metadata API has no top-level error.
NOT_WHOLE_REQUEST = {"write_txn_markers", "metadata"}


def test_every_request_a_coordinator_serves_has_an_error_response():
    for actor in (actors.server.group_coordinator.GroupCoordinatorActor, actors.server.share_coordinator.ShareCoordinatorActor,
                  actors.server.transaction_coordinator.TransactionCoordinatorActor, actors.server.controller.ControllerActor):
        module = vars(inspect.getmodule(actor))
        for name, method in inspect.getmembers(actor, inspect.iscoroutinefunction):
            if name.startswith("_") or "request" not in inspect.signature(method).parameters \
                    or name in NOT_WHOLE_REQUEST:
                continue
            request_type = method.__annotations__["request"]
            request_type = module[request_type] if isinstance(request_type, str) else request_type
            assert request_type in _BUILDERS, f"{actor.__name__}.{name}"
