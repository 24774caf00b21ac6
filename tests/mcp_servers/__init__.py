"""MCP servers written for the tests."""
