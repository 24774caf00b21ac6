"""The ``monitor`` queue: periodic tasks run by beat."""
