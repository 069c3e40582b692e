"""The MCP Python SDK: a client session's messages (:mod:`.session`), the transports it opens
(:mod:`.raw`), direct request calls (:mod:`.direct`), and how the SDK ended a call
(:mod:`.follow`)."""
