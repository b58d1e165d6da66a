"""The Ray backend (`isolation: ray`): backend (`RayBackend`), start (starting or joining
Ray: importable without Ray installed), child and reporter (the task's side), handle,
causes and place (what Ray says of a task, a node, a worker). Nothing is imported here,
so that `actors.backends.ray.start` loads where Ray is not installed."""
