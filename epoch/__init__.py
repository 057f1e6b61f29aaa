"""epoch package."""
