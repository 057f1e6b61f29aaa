"""chaos package."""
