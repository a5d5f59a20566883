"""Running teams: the runner, the storage backend and the Python-facing facade."""
