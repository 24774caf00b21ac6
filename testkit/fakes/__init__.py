"""Fakes of what is outside voxqueue, at its wire, for the tests and the benchmarks."""

from testkit.fakes.provider_server import FakeProviders, FakeProvidersClient, spawn

__all__ = ["FakeProviders", "FakeProvidersClient", "spawn"]
