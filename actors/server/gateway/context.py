"""What a request's handler knows of where it came from: the connection and the listener.
The gateway sets both per connection; the tasks serving its requests inherit them."""
from __future__ import annotations

import contextvars

# The ServerConnection (runtime.wire.connection): share sessions end with it, and it holds
# the connection's SASL state.
CONNECTION: contextvars.ContextVar = contextvars.ContextVar("connection", default=None)
# The listener's name: Metadata and FindCoordinator answer with that listener's endpoints.
LISTENER: contextvars.ContextVar = contextvars.ContextVar("listener", default=None)
