"""The ``agent`` queue: the agent loop as a chain of tasks over the session's history."""
