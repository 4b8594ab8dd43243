"""Two stored runs -> the one verdict: the run model every reader shares (``runs``), the ruler they
were measured with (``ruler``), the paired comparison (``comparison``) and the gate (``gate``).
Nothing here imports a surface (the plugin, the CLI, the server, the reports): they read its result."""
