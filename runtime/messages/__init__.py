"""Request, response and nested struct dataclasses, named as in Kafka's message JSON schemas
(field names are the snake_case of Kafka's). One module per protocol; import from it
(`runtime.messages.group`). Every actor is a new process and defining a frozen dataclass
costs about 0.85 ms (there are some 180): importing only its protocols' modules spares a
partition host or a consumer about 0.1 s of CPU at each start. A name asked of this package
itself (`runtime.messages.error_response`) is looked up in the modules on first use."""
import importlib

_MODULES = ("errors", "topics", "txn", "group", "share_state", "consumer", "share", "share_group")


def __getattr__(name: str):
    for module in _MODULES:
        found = importlib.import_module(f"{__name__}.{module}")
        if name in found.__all__:
            return getattr(found, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
