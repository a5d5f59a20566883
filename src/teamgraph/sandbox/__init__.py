"""A code-execution sandbox: Python under bubblewrap, with resource limits and callable tools.

```
result = await Sandbox(SandboxLimits(wall_time_s=5)).run("print('hi')\\n1 + 1")
result.stdout, result.value  # ('hi\\n', '2')
```

See ``docs/sandbox.md`` for what the boundary does and does not protect against.
"""

from teamgraph.errors import SandboxUnavailable
from teamgraph.sandbox.exec_result import ExecResult
from teamgraph.sandbox.limits import SandboxLimits
from teamgraph.sandbox.sandbox import Sandbox

__all__ = ["ExecResult", "Sandbox", "SandboxLimits", "SandboxUnavailable"]
