"""The test suite: a package, so its helper modules are imported as ``tests.<module>``."""
