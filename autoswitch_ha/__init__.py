"""autoswitch_ha package."""
