"""Chat models: resolution of ``provider:model`` strings, the offline model, usage and cost."""
