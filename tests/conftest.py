"""Fixtures shared by the whole suite, registered as plugins (PostgreSQL and Cosmos DB services)."""

pytest_plugins = ["tests.cosmos_service", "tests.pg_service"]
