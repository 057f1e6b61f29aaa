"""admin_cli package."""
