"""Request, response and nested struct dataclasses, named as in Kafka's message JSON schemas
(field names are the snake_case of Kafka's). One module per protocol; all re-exported here."""
from .errors import *  # noqa: F401,F403
from .topics import *  # noqa: F401,F403
from .txn import *  # noqa: F401,F403
from .group import *  # noqa: F401,F403
from .share_state import *  # noqa: F401,F403
from .consumer import *  # noqa: F401,F403
from .share import *  # noqa: F401,F403
from .share_group import *  # noqa: F401,F403
