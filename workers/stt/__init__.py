"""The ``stt`` queue: speech to text."""
