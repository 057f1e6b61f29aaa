"""replicas_manager package."""
