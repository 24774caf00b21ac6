"""Fakes for tests and benchmarks."""

from tests.fakes.provider_server import FakeProviders, FakeProvidersClient, spawn

__all__ = ["FakeProviders", "FakeProvidersClient", "spawn"]
