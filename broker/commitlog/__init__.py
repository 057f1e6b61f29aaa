"""Segmented commit log: fixed-size files, self-delimiting messages, crash recovery."""
