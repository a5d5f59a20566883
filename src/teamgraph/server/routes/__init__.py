"""The core's own routes, one module per resource: accounts and API keys, sessions, teams, the
web workspace. (Runs are served by the protocol adapters, :mod:`teamgraph.server.protocols`.)"""
